"""A model as a program: one JSON request per line on stdin, one JSON answer per line on stdout.

    peira run --adapter subprocess --adapter-arg command="python data/samples/my_model.py" ...

It answers with the option its prompt names last (a deliberately naive rule).
"""

import json
import sys

for line in sys.stdin:
    request = json.loads(line)
    prompt, options = request["prompt"].lower(), request["options"]
    decision = max(options, key=lambda option: prompt.rfind(option.lower()))
    print(json.dumps({"decision": decision, "confidence": 0.6}), flush=True)
