"""The parsers of ``config``, ``doctor`` and ``completion`` (run by :mod:`cli.config`,
:mod:`cli.doctor` and :mod:`cli.completion`)."""

from __future__ import annotations

from wai_dispatch.cli.flags import Sub, add_data_dir, add_json, add_offer, command, runs


def add(sub: Sub) -> None:
    p = command(sub, "config", "wai-dispatch config\nWAI_PORT=9000 wai-dispatch config --json")
    add_data_dir(p)
    add_json(p)
    runs(p, "config:run")

    d = command(sub, "doctor", "wai-dispatch doctor\nwai-dispatch doctor --json")
    add_data_dir(d)
    add_offer(d)
    add_json(d)
    runs(d, "doctor:run")

    c = command(
        sub,
        "completion",
        "wai-dispatch completion bash > /etc/bash_completion.d/wai-dispatch\n"
        'eval "$(wai-dispatch completion zsh)"',
    )
    c.add_argument("shell", choices=("bash", "zsh"))
    runs(c, "completion:run")
