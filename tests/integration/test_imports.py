"""What importing loads: the core (its CLI included) never ``ictd_interp.analyses`` nor ``ictd_interp.hooks``, and a
CLI parser and models list that need no torch."""

import subprocess
import sys


def test_importing_the_package_and_the_model_loads_neither_analyses_nor_hooks():
    code = (
        "import sys, ictd_interp; ictd_interp.HookedICTDTransformer; ictd_interp.train; "
        "bad = [m for m in sys.modules if m.startswith(('ictd_interp.analyses', 'ictd_interp.hooks', 'analyses', "
        "'hooks'))]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_cli_parser_and_the_models_list_import_no_torch():
    code = "import sys, ictd_interp.cli as c; c.build_parser(); assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
    code = (
        "import sys, ictd_interp.cli as c; assert c.main(['models']) == 0; "
        "assert 'torch' not in sys.modules, 'models imported torch'"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "depth3-td-s0" in out and "0.631 [0.541, 0.721]" in out


def test_the_python_api_runs_on_one_thread_unless_told(tmp_path):
    """The first model a process builds or loads sets torch to one thread (ictd_interp.io.threads), unless the count
    was chosen: ICTD_INTERP_THREADS, or a torch.set_num_threads call with a count other than torch's default."""
    import os

    env = {
        k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ICTD_INTERP_THREADS")
    }
    load = "from ictd_interp import HookedICTDTransformer; HookedICTDTransformer.from_pretrained('quick-td-s0'); "

    def threads(code: str, **extra: str) -> str:
        run = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env={**env, **extra}, capture_output=True, text=True, check=True
        )
        return run.stdout.strip()

    assert threads("import torch; " + load + "print(torch.get_num_threads())") == "1"
    assert threads("import torch; " + load + "print(torch.get_num_threads())", ICTD_INTERP_THREADS="2") == "2"
    chosen = "import torch; torch.set_num_threads(3); " + load + "print(torch.get_num_threads())"
    assert threads(chosen) == "3"
