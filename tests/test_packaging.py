"""What a user installs: the built wheel's metadata and names, and a core install that reads
captures without any optional extra.

The core (`pip install overlap-jax`) is protobuf, numpy and pandas. `report`, `check`,
`compare` and `inspect` must run with every optional module blocked (a sitecustomize makes
their import fail, as on a core-only install); the commands that need an extra exit 2 with
one line naming it.
"""

from __future__ import annotations

import email
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tests.conftest import REPO, SAMPLE_TRACES, run_cli

# Top-level modules of the optional extras (and what they pull in): never needed to read.
OPTIONAL = ("jax", "jaxlib", "jax_plugins", "libtpu", "plotly", "dash", "xprof",
            "tensorboard_plugin_profile", "dask", "distributed", "shtab", "scipy")
CORE = {"protobuf", "numpy", "pandas"}


@pytest.fixture(scope="module")
def core_only(tmp_path_factory) -> dict[str, str]:
    """Environment for run_cli in which every OPTIONAL module fails to import."""
    d = tmp_path_factory.mktemp("core-only")
    (d / "sitecustomize.py").write_text(
        "import sys\n"
        f"BLOCKED = {OPTIONAL!r}\n"
        "class _CoreOnly:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _CoreOnly())\n")
    return {"PYTHONPATH": f"{d}:{REPO}"}


def test_the_block_is_real(core_only):
    r = subprocess.run([sys.executable, "-c", "import numpy, pandas, google.protobuf\n"
                        "try:\n    import plotly\nexcept ImportError:\n    print('blocked')"],
                       capture_output=True, text=True, env={**core_only}, timeout=60)
    assert r.stdout.strip() == "blocked", r.stderr


@pytest.mark.parametrize("args,code,expect", [
    (("report", "tpu-v6e-offload"), 0, "hidden"),
    (("report", "tpu-v6e-offload", "--json"), 0, '"summary"'),
    (("check", "tpu-v6e-offload", "--min-overlap", "0"), 0, "PASS"),
    (("check", "cpu-scan/offload_x"), 1, "FAIL (no_transfers)"),
    (("inspect", "cpu-scan/offload_x"), 0, "backend: cpu"),
    (("compare", "cpu-scan"), 0, "offload_x"),
])
def test_reading_commands_need_only_the_core(core_only, args, code, expect):
    cmd, path, *rest = args
    r = run_cli(cmd, str(SAMPLE_TRACES / path), *rest, env=core_only)
    assert r.returncode == code, r.stderr
    assert expect in r.stdout
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args,extra", [
    (("plan", "--target", "h100", "--workload", "scan", "--out", "{tmp}/plans"), "plan"),
    (("dashboard",), "dashboard"),
    (("demo", "--out", "{tmp}/demo"), "demo"),
    (("capture", "--workload", "scan:tiny", "--out", "{tmp}/cap"), "capture"),
    (("report", str(SAMPLE_TRACES / "cpu-scan" / "offload_x"), "--html", "{tmp}/r.html"),
     "dashboard"),
    (("completion", "bash"), "completion"),
])
def test_commands_needing_an_extra_exit_2_naming_it(core_only, tmp_path, args, extra):
    r = run_cli(*(a.replace("{tmp}", str(tmp_path)) for a in args), env=core_only, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert f"pip install 'overlap-jax[{extra}]'" in lines[0]
    assert list(tmp_path.iterdir()) == [], "nothing is written before the extra is checked"


@pytest.mark.slow
def test_built_wheel_metadata_and_top_level_names(tmp_path):
    """`python -m build --wheel` (no isolation: this environment's setuptools), then the wheel's
    metadata, file list and `twine check`."""
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                        "--outdir", str(tmp_path), str(REPO)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (wheel,) = tmp_path.glob("overlap_jax-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    zf = zipfile.ZipFile(wheel)
    meta = email.message_from_bytes(zf.read(f"{info}/METADATA"))
    assert meta["Name"] == "overlap-jax"
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert f"{info}/licenses/LICENSE" in names
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Source", "Issues", "Changelog"} <= set(urls)
    classifiers = meta.get_all("Classifier")
    assert "Typing :: Typed" in classifiers and any("Python :: 3.11" in c for c in classifiers)
    core = {d.split(">")[0].split("=")[0].strip() for d in meta.get_all("Requires-Dist")
            if "extra ==" not in d}
    assert core == CORE
    extras = set(meta.get_all("Provides-Extra"))
    assert {"dashboard", "capture", "cuda", "attach", "plan", "dask", "demo", "all",
            "completion", "test"} <= extras
    # One top-level import name, `overlap`: no bare `dashboard` (or tests/benchmarks) module.
    top = zf.read(f"{info}/top_level.txt").decode().split()
    assert top == ["overlap"]
    assert {n.split("/")[0] for n in names} == {"overlap", info}
    assert "overlap/dashboard/app.py" in names and "overlap/py.typed" in names
    assert "overlap/trace/protos/xplane.proto" in names
    # the compiled XSpace scanner (setup.py; Cython at build time only)
    assert any(n.startswith("overlap/trace/_scan.") and n.endswith((".so", ".pyd"))
               for n in names), [n for n in names if "_scan" in n]
    entry = zf.read(f"{info}/entry_points.txt").decode()
    assert "overlap = overlap.cli.main:run" in entry
    t = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)],
                       capture_output=True, text=True, timeout=120)
    assert t.returncode == 0 and "PASSED" in t.stdout, t.stdout + t.stderr


@pytest.mark.slow
def test_sdist_builds_the_scanner_from_source(tmp_path):
    """The sdist (what pip builds from where no wheel fits the platform) carries the scanner's
    Cython source and setup.py, never a generated `_scan.c` or a compiled module from this
    checkout, and no tests (they need the repository)."""
    r = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation",
                        "--outdir", str(tmp_path), str(REPO)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (sdist,) = tmp_path.glob("overlap_jax-*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert {"setup.py", "pyproject.toml", "LICENSE", "README.md", "CHANGELOG.md",
            "overlap/trace/_scan.pyx", "overlap/trace/protos/xplane.proto"} <= names
    assert not [n for n in names if n.startswith("overlap/trace/_scan.")
                and not n.endswith(".pyx")]
    assert not [n for n in names if n.startswith("tests/")]
