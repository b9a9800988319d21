#!/usr/bin/env python3
"""Generates the secret-scan measurement sets of bench/secrets.sh (issue 28).

Usage: secrets_corpus.py OUT [SEED]

OUT/recall/<shape>/NNNN.txt holds one planted secret in one shape of those issue 28
found stored; NNNN.txt.pieces lists the pieces of the secret as the file spells them
(`secret_scan --recall` counts a file caught when none of them is left):

  split     a Claude Code or Codex session line whose key is cut across 2 or 3 adjacent
            text blocks of one message, at random places
  slash     a token with JSON's escaped slash (\\/) at a random place inside, in a JSON
            line, a JavaScript line and a log line
  aws_pair  a bare AWS secret access key beside its key id (space, comma, the console's
            CSV, `--output text`, JSON)
  b64pem    a real private key (openssl, ssh-keygen) base64-encoded: a kubeconfig, a
            Kubernetes secret, a bare line, wrapped at 76 and 64 columns

OUT/precision/b64certs/ holds every certificate of /etc/ssl/certs base64-encoded the
way kubeconfigs carry them (none may be flagged), and a public key the same way.
"""

import base64
import json
import os
import random
import subprocess
import sys
import tempfile

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
B64 = ALNUM + "+/"


def rand(rng, alphabet, n):
    return "".join(rng.choice(alphabet) for _ in range(n))


def tokens(rng):
    """One fresh token of each prefixed kind: (token, where its counted part starts)."""
    return [
        ("sk-ant-api03-" + rand(rng, ALNUM + "_-", 82) + "AA", 13),
        ("sk-proj-" + rand(rng, ALNUM, 40), 8),
        ("ghp_" + rand(rng, ALNUM, 36), 4),
        ("github_pat_" + rand(rng, ALNUM + "_", 60), 11),
        ("xoxb-" + rand(rng, "0123456789", 12) + "-" + rand(rng, ALNUM, 24), 5),
        ("AIza" + rand(rng, ALNUM + "_-", 35), 4),
        ("glpat-" + rand(rng, ALNUM, 20), 6),
        ("npm_" + rand(rng, ALNUM, 36), 4),
        ("sk_live_" + rand(rng, ALNUM, 24), 8),
        ("hf_" + rand(rng, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 34), 3),
    ]


def write(out, shape, n, text, pieces):
    d = os.path.join(out, "recall", shape)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "%04d.txt" % n)
    with open(path, "w") as f:
        f.write(text)
    with open(path + ".pieces", "w") as f:
        f.write("\n".join(pieces) + "\n")


def cut(rng, token, parts):
    """`token` cut into `parts` pieces at random places."""
    at = sorted(rng.sample(range(1, len(token)), parts - 1))
    return [token[i:j] for i, j in zip([0] + at, at + [len(token)])]


def split_shapes(out, rng):
    n = 0
    for _ in range(30):
        for token, _ in tokens(rng):
            parts = cut(rng, token, rng.choice([2, 2, 3]))
            texts = list(parts)
            texts[0] = "The key is " + texts[0]
            texts[-1] = texts[-1] + " and that is all."
            blocks = [{"type": "text", "text": t} for t in texts]
            if n % 3 == 0:
                line = {"type": "assistant", "message": {"id": "msg_%d" % n, "role": "assistant", "content": blocks}}
            elif n % 3 == 1:
                line = {"type": "user", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t%d" % n, "content": blocks}]}}
            else:
                codex = [{"type": "output_text", "text": t} for t in texts]
                line = {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": codex}}
            write(out, "split", n, json.dumps(line) + "\n", parts)
            n += 1


def slash_shapes(out, rng):
    n = 0
    for _ in range(30):
        for token, counted in tokens(rng):
            at = rng.randrange(counted + 1, len(token))
            escaped = token[:at] + "\\/" + token[at:]
            pieces = [token[:at], token[at:]]
            context = n % 3
            if context == 0:
                text = '{"role":"tool","content":"key %s here"}\n' % escaped
            elif context == 1:
                text = 'const key = "%s"; // from the server\n' % escaped
            else:
                text = '2026-12-03T10:00:00Z response {"k":"%s"}\n' % escaped
            write(out, "slash", n, text, pieces)
            n += 1


def aws_pair_shapes(out, rng):
    for n in range(200):
        key_id = rng.choice(["AKIA", "ASIA"]) + rand(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
        secret = rand(rng, B64, 40)
        shape = n % 5
        if shape == 0:
            text = "%s %s\n" % (key_id, secret)
        elif shape == 1:
            text = "keys: %s, %s\n" % (key_id, secret)
        elif shape == 2:
            text = "User name,Access key ID,Secret access key\ndeploy,%s,%s\n" % (key_id, secret)
        elif shape == 3:
            text = "CREDENTIALS\t%s\t2026-12-03T13:00:00+00:00\t%s\tFwoGZXIvYXdzEBYaDH\n" % (key_id, secret)
        else:
            text = json.dumps({"AccessKeyId": key_id, "SecretAccessKey": secret}) + "\n"
        write(out, "aws_pair", n, text, [secret])


def private_keys():
    """Real private keys in every armour baton knows, made here."""
    keys = []
    with tempfile.TemporaryDirectory() as tmp:
        def run(*args):
            subprocess.run(args, check=True, capture_output=True)
        for algo, opts in [("RSA", ["-pkeyopt", "rsa_keygen_bits:2048"]), ("EC", ["-pkeyopt", "ec_paramgen_curve:P-256"]), ("ED25519", [])]:
            path = os.path.join(tmp, algo + ".pem")
            run("openssl", "genpkey", "-algorithm", algo, *opts, "-out", path)
            keys.append(open(path).read())
        rsa = os.path.join(tmp, "RSA.pem")
        run("openssl", "pkey", "-in", rsa, "-traditional", "-out", rsa + ".pkcs1")
        keys.append(open(rsa + ".pkcs1").read())
        run("openssl", "pkcs8", "-topk8", "-in", rsa, "-passout", "pass:x", "-out", rsa + ".enc")
        keys.append(open(rsa + ".enc").read())
        ssh = os.path.join(tmp, "id_ed25519")
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", ssh)
        keys.append(open(ssh).read())
        run("openssl", "pkey", "-in", rsa, "-pubout", "-out", rsa + ".pub")
        public = open(rsa + ".pub").read()
    return keys, public


def b64pem_shapes(out):
    keys, public = private_keys()
    n = 0
    for key in keys:
        encoded = base64.b64encode(key.encode()).decode()
        pieces = [encoded[20:40], encoded[len(encoded) // 2:len(encoded) // 2 + 20], encoded.rstrip("=")[-20:]]
        for shape in range(5):
            if shape == 0:
                text = "users:\n- name: ci\n  user:\n    client-key-data: %s\n" % encoded
            elif shape == 1:
                text = json.dumps({"apiVersion": "v1", "kind": "Secret", "data": {"tls.key": encoded}}) + "\n"
            elif shape == 2:
                text = encoded + "\n"
            else:
                width = 76 if shape == 3 else 64
                text = "\n".join(encoded[i:i + width] for i in range(0, len(encoded), width)) + "\n"
            write(out, "b64pem", n, text, pieces)
            n += 1
    return public


def b64certs(out, public):
    d = os.path.join(out, "precision", "b64certs")
    os.makedirs(d, exist_ok=True)
    certs = sorted(os.listdir("/etc/ssl/certs")) if os.path.isdir("/etc/ssl/certs") else []
    n = 0
    for name in certs:
        path = os.path.join("/etc/ssl/certs", name)
        if not name.endswith(".pem") or not os.path.isfile(path):
            continue
        encoded = base64.b64encode(open(path, "rb").read()).decode()
        with open(os.path.join(d, "%04d.yaml" % n), "w") as f:
            f.write("clusters:\n- cluster:\n    certificate-authority-data: %s\n" % encoded)
        n += 1
    with open(os.path.join(d, "public.yaml"), "w") as f:
        f.write("key: %s\n" % base64.b64encode(public.encode()).decode())


def main():
    out = sys.argv[1]
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 28)
    split_shapes(out, rng)
    slash_shapes(out, rng)
    aws_pair_shapes(out, rng)
    public = b64pem_shapes(out)
    b64certs(out, public)


if __name__ == "__main__":
    main()
