"""Command lines the CLI tests share."""


def small_evaluate(source: str, out, context_len: int = 16, depth: int = 4, env: str = "loop") -> list[str]:
    """``ictd-interp evaluate`` of ``source`` on 4 tasks of ``env``, into ``out``: seconds."""
    sizes = ["--n-tasks", "4", "--context-len", str(context_len), "--depth", str(depth)]
    return ["evaluate", source, "--env", env, *sizes, "--out", str(out)]
