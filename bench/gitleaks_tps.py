#!/usr/bin/env python3
"""The recall set of bench/secrets.sh (issue 29): gitleaks' own true positives.

Usage: gitleaks_tps.py GITLEAKS_DIR OUT [SEED]

GITLEAKS_DIR is a checkout of github.com/gitleaks/gitleaks. Each rule of its default
config (cmd/generate/config/rules/*.go) is a Go function that lists the strings the rule
must detect (`tps`) and validates them: literals, `utils.GenerateSampleSecrets(id, s)` (the
secret in some 30 config and code shapes, from cmd/generate/config/utils/generate.go),
`secrets.NewSecret(regex)` (a random string the regex matches), concatenations,
`fmt.Sprintf`, `append`. This script evaluates those statements (a small evaluator of
that subset of Go; regex-generated secrets by the `rstr` package, seeded) and writes
OUT/<rule id>/NNNN.txt, one true positive each. A statement it cannot evaluate is left
out and counted (printed to stderr). `secret_scan --detect OUT` counts, per rule, the
files in which the scan finds anything.

Requires: pip install rstr.
"""

import os
import random
import re
import sys

import rstr
import importlib

# Counted repeats longer than rstr's cap (100) occur (`[a-z0-9]{163}`); unbounded ones
# get up to this many.
importlib.import_module("rstr.xeger").STAR_PLUS_LIMIT = 200

TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|`[^`]*`|\.\.\.|:=|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[0-9]+|.',
    re.S,
)


class Unknown(Exception):
    pass


def tokens(src):
    out = []
    for m in TOKEN.finditer(src):
        t = m.group(0)
        if t.isspace() or t.startswith("//") or t.startswith("/*"):
            continue
        out.append(t)
    return out


def go_string(t):
    if t.startswith("`"):
        return t[1:-1]
    body = t[1:-1]
    out, i = [], 0
    simple = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
        elif e == "x":
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        elif e == "u":
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif e == "U":
            out.append(chr(int(body[i + 2:i + 10], 16)))
            i += 10
        else:
            raise Unknown("escape " + e)
    return "".join(out)


class Eval:
    def __init__(self, rng, samples):
        self.rng = rng
        self.rstr = rstr.Rstr(rng)
        self.samples = samples

    def secret(self, regex):
        regex = regex.replace("(?-i:", "(?:")
        try:
            return self.rstr.xeger(regex)
        except Exception as e:  # a Go-only construct
            raise Unknown("regex %r: %s" % (regex, e))

    def call(self, name, args):
        size = {"utils.Numeric": "[0-9]{%s}", "utils.Hex": "[a-f0-9]{%s}", "utils.AlphaNumeric": "[a-z0-9]{%s}",
                "utils.AlphaNumericExtendedShort": "[a-z0-9_-]{%s}", "utils.AlphaNumericExtended": r"[a-z0-9=_\-]{%s}",
                "utils.AlphaNumericExtendedLong": r"[a-z0-9\/=_\+\-]{%s}"}
        if name in size:
            return size[name] % args[0]
        if name == "utils.Hex8_4_4_4_12":
            return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        if name in ("secrets.NewSecret", "newPlausibleSecret"):
            for _ in range(100):
                s = self.secret(args[0])
                if name == "secrets.NewSecret" or re.search("[1-9]", s):
                    return s
            return s
        if name == "utils.GenerateSampleSecrets":
            ident, secret = args
            return [v.replace("{i}", ident).replace("{I}", ident.upper()).replace("{s}", secret) for v in self.samples]
        if name == "utils.GenerateSampleSecret":
            return '%s_api_token = "%s"' % (args[0], args[1])
        if name == "fmt.Sprintf":
            fmt, rest = args[0], list(args[1:])
            return re.sub(r"%[sdvq]", lambda m: str(rest.pop(0)) if m.group(0) != "%q" else '"%s"' % rest.pop(0), fmt.replace("%%", "\0")).replace("\0", "%")
        if name == "strings.Repeat":
            return args[0] * int(args[1])
        if name == "append":
            out = list(args[0])
            for a in args[1:]:
                out.extend(a if isinstance(a, list) else [a])
            return out
        raise Unknown("call " + name)


class Parser:
    def __init__(self, toks, ev, env):
        self.t, self.i, self.ev, self.env = toks, 0, ev, env

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else ""

    def take(self, want=None):
        t = self.peek()
        if want is not None and t != want:
            raise Unknown("want %r got %r" % (want, t))
        self.i += 1
        return t

    def expr(self):
        v = self.primary()
        while self.peek() == "+":
            self.take()
            w = self.primary()
            if not isinstance(v, str) or not isinstance(w, str):
                raise Unknown("+ of non-strings")
            v += w
        return v

    def primary(self):
        t = self.take()
        if t.startswith('"') or t.startswith("`"):
            return go_string(t)
        if t.isdigit():
            return int(t)
        if t == "[" and self.peek() == "]":
            self.take()
            self.take()  # element type
            return self.composite(list)
        if t == "map" and self.peek() == "[":
            while self.take() != "]":
                pass
            self.take()  # value type
            return self.composite(dict)
        if re.match(r"[A-Za-z_]", t):
            if self.peek() == "(":
                self.take()
                args = []
                while self.peek() != ")":
                    a = self.expr()
                    if self.peek() == "...":
                        self.take()
                    args.append(a)
                    if self.peek() == ",":
                        self.take()
                self.take(")")
                return self.ev.call(t, args)
            if t in self.env and self.env[t] is not None:
                return self.env[t]
            raise Unknown("name " + t)
        if t == "(":
            v = self.expr()
            self.take(")")
            return v
        raise Unknown("token " + t)

    def composite(self, kind):
        self.take("{")
        out = [] if kind is list else {}
        while self.peek() != "}":
            try:
                k = self.expr()
                if kind is dict:
                    self.take(":")
                    out[k] = self.expr()
                else:
                    out.append(k)
            except Unknown as e:
                # Skip this element to the next comma at this depth.
                skip_element(self)
                self.env.setdefault("__skipped", []).append(str(e))
            if self.peek() == ",":
                self.take()
        self.take("}")
        return out


def skip_element(p):
    depth = 0
    while p.i < len(p.t):
        t = p.peek()
        if t in "([{":
            depth += 1
        elif t in ")]}":
            if depth == 0:
                return
            depth -= 1
        elif t == "," and depth == 0:
            return
        p.i += 1


def package_vars(toks, ev, env):
    """Evaluate the top-level `var NAME = EXPR` declarations into `env`."""
    depth = 0
    for i, t in enumerate(toks):
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif depth == 0 and t == "var" and i + 2 < len(toks) and toks[i + 2] == "=":
            try:
                env[toks[i + 1]] = Parser(toks[i + 3:], ev, env).expr()
            except (Unknown, IndexError, ValueError):
                pass


def var_block(st):
    """`var ( a = X  b = Y )` as the statements `a = X`, `b = Y`."""
    inner = st[2:-1]
    return statements(inner)


def functions(toks):
    """(name, body tokens) of each top-level func."""
    i = 0
    while i < len(toks):
        if toks[i] == "func" and re.match(r"[A-Za-z_]", toks[i + 1]):
            name = toks[i + 1]
            j = i + 2
            while toks[j] != "{":
                j += 1
            depth, k = 0, j
            while True:
                if toks[k] == "{":
                    depth += 1
                elif toks[k] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            yield name, toks[j + 1:k]
            i = k
        i += 1


def statements(body):
    """Split a body into statements at top-level line-ish boundaries: an assignment
    `NAME :=`/`NAME =`/`var NAME =` starts one."""
    starts = []
    depth = 0
    for i, t in enumerate(body):
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif depth == 0 and (t == "return" or (i + 1 < len(body) and body[i + 1] in (":=", "=") and (i == 0 or body[i - 1] in ("}", ")", "var") or not re.match(r"[A-Za-z0-9_\"`]", body[i - 1][-1])))):
            starts.append(i - 1 if i > 0 and body[i - 1] == "var" else i)
    starts.append(len(body))
    return [body[a:b] for a, b in zip(starts, starts[1:]) if a < b]


def main():
    src_dir, out = sys.argv[1], sys.argv[2]
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 29)
    gen = open(os.path.join(src_dir, "cmd/generate/config/utils/generate.go")).read()
    samples_src = gen[gen.index("samples := map[string]string{") + len("samples := "):]
    p = Parser(tokens(samples_src), None, {})
    samples = list(p.primary().values())
    ev = Eval(rng, samples)
    rules_dir = os.path.join(src_dir, "cmd/generate/config/rules")
    total = skipped = 0
    for name in sorted(os.listdir(rules_dir)):
        if not name.endswith(".go") or name.endswith("_test.go"):
            continue
        src = open(os.path.join(rules_dir, name)).read()
        toks = tokens(src)
        file_env = {}
        package_vars(toks, ev, file_env)
        for func, body in functions(toks):
            env = dict(file_env)
            rule_id = None
            sts = []
            for st in statements(body):
                sts.extend(var_block(st) if st[:2] == ["var", "("] else [st])
            for st in sts:
                if st[0] == "var":
                    st = st[1:]
                if st[0] == "r" and st[1] == ":=" and "RuleID" in st:
                    k = st.index("RuleID")
                    rule_id = go_string(st[k + 2])
                    continue
                if st[0] == "return":
                    continue
                if len(st) > 2 and st[1] in (":=", "="):
                    try:
                        env[st[0]] = Parser(st[2:], ev, env).expr()
                    except (Unknown, IndexError, ValueError) as e:
                        if st[0] in ("tps", "truePositives"):
                            skipped += 1
                            print("skipped %s %s: %s" % (name, st[0], e), file=sys.stderr)
                        env[st[0]] = env.get(st[0]) if st[0] in ("tps", "truePositives") else None
            tps = env.get("tps")
            if isinstance(tps, dict):
                tps = list(tps.values())
            if not rule_id or not isinstance(tps, list):
                continue
            skipped += len(env.get("__skipped", []))
            d = os.path.join(out, rule_id)
            os.makedirs(d, exist_ok=True)
            for n, tp in enumerate(x for x in tps if isinstance(x, str)):
                with open(os.path.join(d, "%04d.txt" % n), "w") as f:
                    f.write(tp + "\n")
                total += 1
    print("gitleaks true positives: %d written, %d statements or elements skipped" % (total, skipped), file=sys.stderr)


if __name__ == "__main__":
    main()
