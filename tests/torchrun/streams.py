# One line on stdout and one on stderr per rank, naming the rank's place and run, for comparing
# which of them each launcher shows on its console. Each line goes out in one write(2): torchrun
# runs the script unbuffered (python -u) and its --tee threads copy a line caught half-written
# as two (filtered_lines.py says how).
import os

env = os.environ
out = ["OUT", env["LOCAL_RANK"], env["ROLE_NAME"], env["TORCHELASTIC_RUN_ID"], env["MASTER_PORT"]]
os.write(1, (" ".join(out) + "\n").encode())
os.write(2, ("ERR " + env["LOCAL_RANK"] + "\n").encode())
