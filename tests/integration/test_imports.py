"""The import graph: layers, no circles (function-level imports included), the core free of ``analyses`` and
``hooks`` except its CLI, and a CLI parser that needs no torch."""

import subprocess
import sys

# Layers, lowest first: a module may import only its own layer and those before it. The CLI composes
# everything (inside its command functions); ``ictd_interp/__init__`` and ``_lazy`` export lazily.


def test_importing_the_package_and_the_model_loads_neither_analyses_nor_hooks():
    code = (
        "import sys, ictd_interp; ictd_interp.HookedICTDTransformer; ictd_interp.train; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('analyses', 'hooks')]; assert not bad, bad"
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
