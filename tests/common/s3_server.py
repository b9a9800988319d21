"""Test S3 server for baton's integration tests (tests/common/s3.rs starts it).

Runs moto's S3 (and IAM) server in this process on 127.0.0.1 and a free port, then:
creates an IAM user with an allow-all policy and an access key (generated credentials),
creates the bucket as that user, and probes that the server refuses a second
`If-None-Match: *` create of one key (exit 3 with a message otherwise). With --auth it
then turns on moto's request authentication, so a wrong key or secret is refused with 403.
Prints one JSON line {"port", "access_key", "secret_key"}, then answers the harness's
commands on standard input, one JSON line each on standard output, until standard input
closes (the test process exited or dropped the server) and it exits at once:
  list PREFIX   -> [[key, size], ...] for every object under PREFIX (sorted)
  get KEY       -> the object's bytes in hex, or null when there is none
  put KEY HEX   -> true (writes the object unconditionally, for planting test data)
  delete KEY    -> true
State is in memory only: a killed server loses its objects.
"""

import json
import os
import sys


def fix_signature_check() -> None:
    """moto 5.2.1 checks a SigV4 signature against the query string as werkzeug decoded
    it (`prefix=team/`), while clients sign it URI-encoded (`prefix=team%2F`), so every
    signed LIST of a prefix fails with SignatureDoesNotMatch. Re-encode the query the way
    SigV4 specifies before moto computes its signature; the check itself is unchanged."""
    from urllib.parse import quote, unquote

    from moto.iam import access_control

    original = access_control.IAMRequestBase._create_aws_request

    def encode(part: str) -> str:
        return quote(unquote(part), safe="-_.~")

    def create_aws_request(self):
        path, _, query = self._path.partition("?")
        if query:
            pairs = []
            for pair in query.split("&"):
                key, eq, value = pair.partition("=")
                pairs.append(encode(key) + eq + encode(value))
            self._path = path + "?" + "&".join(pairs)
        return original(self)

    access_control.IAMRequestBase._create_aws_request = create_aws_request


def serialise_conditional_writes() -> None:
    """moto 5.2.1 checks `If-None-Match: *` and then stores the object as two steps, and
    its threaded server runs requests at once: two conditional creates of one key that
    arrive together can both succeed (a real S3 serialises them), which would let two
    racing pushers both win. Run every object write and multipart completion under one
    lock, so the check and the store are one step as on a real server."""
    import threading

    from moto.s3.responses import S3Response

    lock = threading.Lock()
    for name in ("put_object", "_key_response_post"):
        original = getattr(S3Response, name)

        def locked(self, *args, __original=original, **kwargs):
            with lock:
                return __original(self, *args, **kwargs)

        setattr(S3Response, name, locked)


def main() -> None:
    auth = "--auth" in sys.argv[1:]
    bucket = sys.argv[1]

    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    import boto3
    import botocore.exceptions
    from moto import settings
    from moto.server import ThreadedMotoServer

    fix_signature_check()
    serialise_conditional_writes()
    # No authentication while the harness sets the server up.
    settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    endpoint = f"http://127.0.0.1:{port}"

    def client(service: str, key: str, secret: str):
        return boto3.client(
            service,
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=key,
            aws_secret_access_key=secret,
        )

    iam = client("iam", "AKIAHARNESSSETUP0000", "setup")
    iam.create_user(UserName="baton-test")
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
    }
    iam.put_user_policy(
        UserName="baton-test", PolicyName="all", PolicyDocument=json.dumps(policy)
    )
    key = iam.create_access_key(UserName="baton-test")["AccessKey"]
    access_key, secret_key = key["AccessKeyId"], key["SecretAccessKey"]

    s3 = client("s3", access_key, secret_key)
    s3.create_bucket(Bucket=bucket)
    probe = "harness-probe/if-none-match"
    s3.put_object(Bucket=bucket, Key=probe, Body=b"first", IfNoneMatch="*")
    try:
        s3.put_object(Bucket=bucket, Key=probe, Body=b"second", IfNoneMatch="*")
        refused = None
    except botocore.exceptions.ClientError as err:
        refused = err.response["ResponseMetadata"]["HTTPStatusCode"]
    body = s3.get_object(Bucket=bucket, Key=probe)["Body"].read()
    s3.delete_object(Bucket=bucket, Key=probe)
    if refused != 412 or body != b"first":
        print(
            f"this server does not enforce If-None-Match: a second conditional create "
            f"got {refused or 'success'}, the object now holds {body!r}",
            file=sys.stderr,
        )
        sys.stderr.flush()
        os._exit(3)

    if auth:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    print(
        json.dumps({"port": port, "access_key": access_key, "secret_key": secret_key}),
        flush=True,
    )
    serve_commands(s3, bucket)


def serve_commands(s3, bucket: str) -> None:
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        op, args = words[0], words[1:]
        if op == "list":
            prefix = args[0] if args else ""
            found = []
            for page in s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix
            ):
                found += [[o["Key"], o["Size"]] for o in page.get("Contents", [])]
            answer = sorted(found)
        elif op == "get":
            try:
                data = s3.get_object(Bucket=bucket, Key=args[0])["Body"].read()
                answer = data.hex()
            except s3.exceptions.NoSuchKey:
                answer = None
        elif op == "put":
            s3.put_object(Bucket=bucket, Key=args[0], Body=bytes.fromhex(args[1]))
            answer = True
        elif op == "delete":
            s3.delete_object(Bucket=bucket, Key=args[0])
            answer = True
        else:
            answer = {"error": f"unknown command {op}"}
        print(json.dumps(answer), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
