#!/usr/bin/python3
"""Regenerates the example blocks of README.md from the real commands, or checks them.

An example block sits between two markers and holds commands (lines starting with "$ ")
followed by what they print:

    <!-- example -->
    ```
    $ pipebal balance reports/examples/demo/profile.json --stages 3
    ...output...
    $ echo $?
    0
    ```
    <!-- /example -->

    tools/update-readme-examples.py               # rewrite every block (and the demo directory)
    tools/update-readme-examples.py --check       # exit 1 if a block differs from what the
                                                  # commands print now (no file is written)
    tools/update-readme-examples.py --keep-demo   # rewrite every block but the demo's

The commands run in one bash shell per block, from the repository root, with the pipebal under
test first on PATH. A block marked `<!-- example: demo -->` runs `pipebal demo` into
reports/examples/demo and is regenerated but not checked: its numbers are timings of this
machine, and the balance it picks follows them.
"""
import argparse
import datetime
import difflib
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(<!-- example(?:: (?P<kind>\w+))? -->\n)(?P<body>.*?)(<!-- /example -->)", re.S)
DELIMITER = "@@pipebal-example-command-done@@"


def run_block(commands, pipebal_dir, cwd):
    """Runs the commands in one shell; returns each one's combined stdout and stderr."""
    script = []
    for command in commands:
        # Keep $? of the command itself for a following `echo $?`.
        script.append(f"{command} 2>&1; __status=$?; echo {DELIMITER}; (exit $__status)")
    env = dict(os.environ, PATH=pipebal_dir + os.pathsep + os.environ["PATH"], COLUMNS="100")
    result = subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    outputs = result.stdout.split(DELIMITER + "\n")
    return outputs[: len(commands)]


def render(commands, outputs):
    lines = ["```"]
    for command, output in zip(commands, outputs):
        lines.append("$ " + command)
        lines.extend(output.rstrip("\n").split("\n") if output.strip() else [])
    lines.append("```")
    return "\n".join(lines) + "\n"


def commands_of(body):
    return [line[2:] for line in body.split("\n") if line.startswith("$ ")]


def machine_description():
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{os.cpu_count()}-core {model}"


def demo_block(pipebal_dir):
    """Runs `pipebal demo` into reports/examples/demo; returns the block's text."""
    out_dir = os.path.join(ROOT, "reports", "examples", "demo")
    with tempfile.TemporaryDirectory() as scratch:
        start = time.monotonic()
        # Run where the default output directory reads as it does for a user.
        output = run_block(["pipebal demo"], pipebal_dir, scratch)[0]
        wall = time.monotonic() - start
        if "wrote " not in output:
            sys.exit("update-readme-examples: pipebal demo failed:\n" + output)
        for name in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, name))
        for name in os.listdir(os.path.join(scratch, "pipebal-demo")):
            os.replace(os.path.join(scratch, "pipebal-demo", name), os.path.join(out_dir, name))
    caption = (f"This is its real output here ({machine_description()}, "
               f"{datetime.date.today().isoformat()}, {wall:.1f} s wall):\n\n")
    return caption + render(["pipebal demo"], [output])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--pipebal", default=os.path.join(ROOT, "build", "tools", "pipebal"),
                        help="the binary to run (default: build/tools/pipebal)")
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    parser.add_argument("--keep-demo", action="store_true",
                        help="rewrite the other blocks from the demo's files as they are, without "
                             "running the demo again (a change of output format, not of timings)")
    args = parser.parse_args()
    if not os.access(args.pipebal, os.X_OK):
        sys.exit(f"update-readme-examples: no pipebal binary at {args.pipebal}")
    pipebal_dir = os.path.dirname(os.path.abspath(args.pipebal))

    with open(args.readme) as f:
        text = f.read()
    drifted = []

    def replace(match):
        body = match.group("body")
        if match.group("kind") == "demo":
            new_body = body if args.check or args.keep_demo else demo_block(pipebal_dir)
        else:
            commands = commands_of(body)
            new_body = render(commands, run_block(commands, pipebal_dir, ROOT))
            if new_body != body:
                drifted.append((commands, body, new_body))
        return match.group(1) + new_body + match.group(4)

    updated = BLOCK.sub(replace, text)
    if args.check:
        for commands, old, new in drifted:
            print(f"README example drifted: {commands[0]}", file=sys.stderr)
            for line in difflib.unified_diff(
                    old.split("\n"), new.split("\n"), "README.md", "commands", lineterm=""):
                print(line, file=sys.stderr)
        if drifted:
            print("run tools/update-readme-examples.py to regenerate", file=sys.stderr)
        return 1 if drifted else 0
    with open(args.readme, "w") as f:
        f.write(updated)
    print(f"update-readme-examples: {len(BLOCK.findall(text))} blocks regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
