"""A real torch TCPStore for jccl's tests: the server, and a torch client that talks with jccl's client.

Prints "PORT <n> TORCH <version>", then, for each line read from stdin:
  set KEY VALUE   -> sets KEY (through torch's client, so the stored key is "/KEY") and prints "OK"
  get KEY         -> waits for KEY (torch's client) and prints "GOT <value>"
  quit            -> exits
"""
import datetime
import sys

import torch
from torch.distributed import TCPStore

store = TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=30))
print("PORT", store.port, "TORCH", torch.__version__, flush=True)
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "set":
        store.set(words[1], words[2])
        print("OK", flush=True)
    elif words[0] == "get":
        print("GOT", store.get(words[1]).decode(), flush=True)
    elif words[0] == "quit":
        break
