"""What every report script shares: running pipebal's binaries, the commit (refusing a dirty
tree, whose numbers no commit could reproduce), the machine, and writing the raw data and the
markdown made from it."""
import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import datetime, timezone


def run(cmd, **kw):
    """Runs `cmd`; exits with its stderr when it fails. Returns stdout."""
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}\n{result.stderr}")
    return result.stdout


def commit(allow_dirty=False):
    """The checkout's commit. Uncommitted changes outside reports/ (where the scripts write
    their results, one after another) are refused unless allowed, and then named "-dirty"."""
    changed = run(["git", "status", "--porcelain", "--", ".", ":(exclude)reports"]).strip()
    head = run(["git", "rev-parse", "--short", "HEAD"]).strip()
    if not changed:
        return head
    if not allow_dirty:
        sys.exit("the tree has uncommitted changes: commit them first, so that the report names "
                 "a commit that reproduces it (or pass --allow-dirty for a trial run)")
    return head + "-dirty"


def machine():
    """'<CPU model>, <n> cores' from /proc/cpuinfo, else the platform's name."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores"


def today():
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


def meta(allow_dirty):
    """What each raw document records about where and when it was made."""
    return {"commit": commit(allow_dirty), "machine": machine(), "date": today()}


def write_whole(path, text):
    """Writes `text` to `path` whole or not at all: an interrupted run leaves the last report."""
    partial = f"{path}.partial"
    with open(partial, "w") as f:
        f.write(text)
    os.replace(partial, path)


def write_json(path, doc):
    write_whole(path, json.dumps(doc, indent=1) + "\n")


def write_text(path, lines):
    write_whole(path, "\n".join(lines) + "\n")
    print(f"wrote {path}", file=sys.stderr)


def binary(build, name, allow_dirty=False):
    """The absolute path of `name` in the build directory `build`. Unless a dirty tree is
    allowed, the build must come from the checkout's HEAD (`pipebal --version` names the commit
    it was built from): a report must not name a commit its binaries were not built from."""
    path = os.path.abspath(os.path.join(build, name))
    if not os.path.exists(path):
        sys.exit(f"{path} is missing: build it first (benchmarks: -DPIPEBAL_BUILD_BENCH=ON)")
    if not allow_dirty:
        check_built_from_head(build)
    return path


def check_built_from_head(build):
    pipebal = os.path.abspath(os.path.join(build, "tools", "pipebal"))
    version = run([pipebal, "--version"]).strip()  # "pipebal 0.1.0 (92653ce)"
    built = version[version.rfind("(") + 1:].rstrip(")")
    head = run(["git", "rev-parse", "--short", "HEAD"]).strip()
    if built != head:
        sys.exit(f"{build} was built from {built}, not from HEAD ({head}): rebuild it "
                 f"(cmake --build {build}) so that the report names the commit it measured")


def report_main(parser, raw_path, md_path, measure, summary, meta_key=None, keep_partial=False):
    """A report script's command line: the options every script takes (--build, --allow-dirty,
    --from-raw) added to `parser`, then either the summary written again from the committed raw
    data, or `measure(pipebal, args, work)` (the raw fields, measured in the scratch directory
    `work`) written beside this run's metadata (under `meta_key` when given, else at the top)
    and the summary made from them. With `keep_partial`, a long measurement also gets
    `save(fields)`, `measure(pipebal, args, work, save)`, which writes the raw data measured so
    far: an interrupted run keeps it."""
    parser.add_argument("--build", default="build")
    parser.add_argument("--allow-dirty", action="store_true")
    parser.add_argument("--from-raw", action="store_true",
                        help="write the summary from the raw file, measuring nothing")
    args = parser.parse_args()
    if args.from_raw:
        write_text(md_path, summary(json.load(open(raw_path))))
        return
    pipebal = binary(args.build, "tools/pipebal", args.allow_dirty)
    raw = {meta_key: meta(args.allow_dirty)} if meta_key else meta(args.allow_dirty)
    with tempfile.TemporaryDirectory() as work:
        if keep_partial:
            raw.update(measure(pipebal, args, work, lambda fields: write_json(raw_path,
                                                                              {**raw, **fields})))
        else:
            raw.update(measure(pipebal, args, work))
    write_json(raw_path, raw)
    write_text(md_path, summary(raw))
