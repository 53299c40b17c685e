"""A model program for peira.adapters:Subprocess tests (JSON lines on stdin/stdout).

``--crash-every N``: exit with code 3 on every Nth request of this process
(before answering it). ``--garbage``: answer non-JSON text. ``--silent-on
WORD``: never answer a request whose prompt contains WORD. ``--text``:
answer with raw_text only. ``--env-on-fail``: print the environment to stderr
(``OPENAI_API_KEY``, ``MY_SERVICE_TOKEN`` and ``EXTRA_CRED`` last, so the quoted
tail holds them) and exit with code 2 on every request.
"""

import argparse
import hashlib
import json
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--crash-every", type=int, default=0)
p.add_argument("--garbage", action="store_true")
p.add_argument("--silent-on", default=None)
p.add_argument("--text", action="store_true")
p.add_argument("--env-on-fail", action="store_true")
args = p.parse_args()

n = 0
for line in sys.stdin:
    n += 1
    if args.crash_every and n % args.crash_every == 0:
        print(f"model: crashing on request {n}", file=sys.stderr, flush=True)
        sys.exit(3)
    r = json.loads(line)
    if args.env_on_fail:
        for k, v in sorted(os.environ.items()):
            print(f"{k}={v}", file=sys.stderr)
        for k in ("OPENAI_API_KEY", "MY_SERVICE_TOKEN", "EXTRA_CRED"):
            print(f"{k}={os.environ.get(k)}", file=sys.stderr)
        sys.stderr.flush()
        sys.exit(2)
    if args.silent_on and args.silent_on in r["prompt"]:
        time.sleep(3600)
    if args.garbage:
        print("%%% not json at all %%%", flush=True)
        continue
    h = hashlib.sha256((r["prompt"] + "|" + str(r["sample"])).encode()).digest()
    pick = r["options"][h[0] % len(r["options"])]
    conf = (50 + h[1] % 50) / 100
    if args.text:
        out = {"raw_text": f"Decision: {pick}\nConfidence: {conf:.2f}", "tokens_out": 5}
    else:
        out = {"decision": pick, "confidence": conf, "variant_id": r["variant_id"]}
    print(json.dumps(out), flush=True)
