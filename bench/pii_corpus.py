"""The recall set of the personal-data scan (bench/pii.sh): generated items of each kind
in the formats people write them, and look-alikes that must not be found.

Usage: python3 bench/pii_corpus.py OUT.tsv

Each line is SET<TAB>KIND<TAB>TEXT: TEXT holds one item of KIND (or, for KIND `none`, a
look-alike of no kind), in a sentence, a JSON-escaped transcript string or alone. SET
names the format, so that the table shows which formats are caught. Seeded: the same
file every run.
"""
import json
import random
import sys

rng = random.Random(29)
N = 50  # items per set


def luhn_complete(prefix, length):
    digits = [int(c) for c in prefix]
    while len(digits) < length - 1:
        digits.append(rng.randrange(10))
    for check in range(10):
        total = 0
        for i, d in enumerate(reversed(digits + [check])):
            if i % 2 == 1:
                d *= 2
                if d > 9:
                    d -= 9
            total += d
        if total % 10 == 0:
            return "".join(map(str, digits + [check]))
    raise AssertionError


def card_number():
    brand = rng.choice(["visa", "mc", "mc2", "amex", "discover", "jcb", "unionpay", "diners"])
    prefix, length = {
        "visa": ("4", 16),
        "mc": (str(rng.randint(51, 55)), 16),
        "mc2": (str(rng.randint(2221, 2720)), 16),
        "amex": (rng.choice(["34", "37"]), 15),
        "discover": ("6011", 16),
        "jcb": (str(rng.randint(3528, 3589)), 16),
        "unionpay": ("62", 16),
        "diners": ("36", 14),
    }[brand]
    number = luhn_complete(prefix, length)
    if "000000" in number:
        return card_number()
    return number


def grouped(number, sep):
    if len(number) == 15:
        return sep.join([number[:4], number[4:10], number[10:]])
    if len(number) == 14:
        return sep.join([number[:4], number[4:10], number[10:]])
    return sep.join(number[i : i + 4] for i in range(0, len(number), 4))


def ssn():
    while True:
        area = rng.randint(1, 899)
        if area != 666:
            return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def nanp():
    return rng.randint(201, 989), rng.randint(200, 999), rng.randint(0, 9999)


FIRST = ["jane", "bob", "maria", "li", "olu", "sanjay", "eva", "tom", "ana", "kenji"]
LAST = ["doe", "smith", "garcia", "wang", "adeyemi", "patel", "novak", "berg", "silva", "sato"]
DOMAINS = ["gmail.com", "corp-mail.io", "mail.uni-hamburg.de", "dept.cs.stanford.edu",
           "yahoo.co.uk", "outlook.fr", "acme.com.au", "startup.ai", "posteo.net", "web.de"]


def email():
    f, l, d = rng.choice(FIRST), rng.choice(LAST), rng.choice(DOMAINS)
    local = rng.choice([f"{f}.{l}", f"{f}_{l}", f"{f}{rng.randint(1, 99)}", f"{f[0]}{l}",
                        f"{f}+billing", f"{f}.{l}{rng.randint(70, 99)}"])
    return rng.choice([local, local.upper()]) + "@" + d


def transcript(text):
    """TEXT as it sits in a JSON line: escaped, after an escaped newline."""
    line = json.dumps({"type": "user", "message": {"content": "see below\n" + text + "\n"}})
    return line


def sets():
    yield "email plain", "email", lambda: f"Reach {email()} about the import."
    yield "email <angle>", "email", lambda: f"From: Jane Doe <{email()}>"
    yield "email mailto", "email", lambda: f"[mail](mailto:{email()})"
    yield "email in JSON", "email", lambda: transcript(f"customer {email()} complained")
    yield "phone E.164 spaced", "phone", lambda: "call " + rng.choice([
        "+1 {} {} {:04d}".format(*nanp()), "+44 20 {} {:04d}".format(rng.randint(7000, 8999), rng.randint(0, 9999)),
        "+49 30 {}".format(rng.randint(1000000, 99999999)), "+33 1 {} {} {} {}".format(*[f"{rng.randint(0, 99):02d}" for _ in range(4)]),
        "+91 {} {}".format(rng.randint(70000, 99999), rng.randint(10000, 99999)), "+61 2 {} {}".format(rng.randint(1000, 9999), rng.randint(1000, 9999))])
    yield "phone E.164 unseparated", "phone", lambda: "number: +1{}{}{:04d}".format(*nanp())
    yield "phone E.164 dashes/(0)", "phone", lambda: rng.choice([
        "+1-{}-{}-{:04d}".format(*nanp()), "+49 (0)30 {}".format(rng.randint(1000000, 9999999)),
        "+81-3-{}-{}".format(rng.randint(1000, 9999), rng.randint(1000, 9999))])
    yield "phone NANP (415) 555-2671", "phone", lambda: "({}) {}-{:04d}".format(*nanp())
    yield "phone NANP 415-555-2671", "phone", lambda: "{}-{}-{:04d} is the desk".format(*nanp())
    yield "phone NANP 415.555.2671", "phone", lambda: "{}.{}.{:04d}".format(*nanp())
    yield "phone in JSON", "phone", lambda: transcript("+1 {} {} {:04d}".format(*nanp()))
    yield "phone national + context", "phone", lambda: rng.choice([
        "Tel: 020 {} {:04d}".format(rng.randint(7000, 8999), rng.randint(0, 9999)),
        "phone 030 {}".format(rng.randint(1000000, 9999999)),
        "mobile 06 {} {} {} {}".format(*[f"{rng.randint(0, 99):02d}" for _ in range(4)]),
        "call 0{} {}".format(rng.randint(7000, 7999), rng.randint(100000, 999999))])
    yield "phone national, no context", "phone", lambda: rng.choice([
        "020 {} {:04d}".format(rng.randint(7000, 8999), rng.randint(0, 9999)),
        "06 {} {} {} {}".format(*[f"{rng.randint(0, 99):02d}" for _ in range(4)])])
    yield "ssn 123-45-6789", "ssn", lambda: f"SSN on file: {ssn()}."
    yield "ssn bare dashes", "ssn", lambda: f"{ssn()}"
    yield "ssn spaced/unseparated + context", "ssn", lambda: "ssn " + rng.choice(
        [ssn().replace("-", " "), ssn().replace("-", "")])
    yield "ssn in JSON", "ssn", lambda: transcript(f"their SSN is {ssn()}")
    yield "card 4-4-4-4 spaces", "card", lambda: f"charged {grouped(card_number(), ' ')} twice"
    yield "card 4-4-4-4 dashes", "card", lambda: grouped(card_number(), "-")
    yield "card unseparated + context", "card", lambda: f"card number {card_number()}"
    yield "card unseparated, no context", "card", lambda: f"{card_number()}"
    yield "card in JSON", "card", lambda: transcript(grouped(card_number(), " "))
    yield "look-alikes", "none", lambda: rng.choice([
        "version {}.{}.{}".format(rng.randint(0, 20), rng.randint(0, 99), rng.randint(0, 999)),
        "at {}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}+00:00".format(rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)),
        "src/lib.rs:{}:{}".format(rng.randint(1, 9999), rng.randint(1, 200)),
        "host {}.{}.{}.{}:{}".format(*[rng.randint(1, 254) for _ in range(4)], rng.randint(1, 65535)),
        "ports {}-{}".format(rng.randint(1000, 5000), rng.randint(5001, 9999)),
        "commit {:040x}".format(rng.getrandbits(160)),
        "id {}".format(rng.randint(10**15, 10**19)),
        "uuid {:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}".format(rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(12), rng.getrandbits(12), rng.getrandbits(48)),
        "ts {}".format(rng.randint(1_600_000_000_000, 1_800_000_000_000)),
        "{}-{:02d}-{:04d}".format(rng.choice(["000", "666", "912"]), rng.randint(1, 99), rng.randint(1, 9999)),
        "card {}".format(int(card_number()) + 1),
        "git@github.com:{}/{}.git".format(rng.choice(FIRST), rng.choice(LAST)),
        "{}+{}@users.noreply.github.com".format(rng.randint(1000, 99999), rng.choice(FIRST)),
        "{}@example.com".format(rng.choice(FIRST)),
        "x = a +{} - b".format(rng.randint(10**7, 10**9)),
        "offset {:+d}".format(rng.randint(10**7, 10**9)),
        "sizes {} {} {}".format(rng.randint(100, 999), rng.randint(100, 999), rng.randint(1000, 9999)),
    ])


def main():
    out = []
    for name, kind, make in sets():
        for _ in range(N * (4 if kind == "none" else 1)):
            text = make()
            assert "\t" not in text and "\n" not in text
            out.append(f"{name}\t{kind}\t{text}")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(out) + "\n")


main()
