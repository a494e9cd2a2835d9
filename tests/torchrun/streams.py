# One line on stdout and one on stderr per rank, naming the rank's place and run, for comparing
# which of them each launcher shows on its console.
import os
import sys

env = os.environ
print("OUT", env["LOCAL_RANK"], env["ROLE_NAME"], env["TORCHELASTIC_RUN_ID"], env["MASTER_PORT"],
      flush=True)
print("ERR", env["LOCAL_RANK"], file=sys.stderr, flush=True)
