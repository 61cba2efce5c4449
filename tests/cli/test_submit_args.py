"""What a submitted run's job is told of the run options given to ``topo run -b slurm``:
each option set away from its default, nothing else."""

from __future__ import annotations

from pathlib import Path

from topo.backends.rotation import DEFAULT_LOG_KEEP, DEFAULT_LOG_MAX_MB
from topo.cli.run_options import Settings
from topo.cli.run_submit import launcher_args


def _settings(**changed: object) -> Settings:
    base: dict[str, object] = {
        "grace_s": None,
        "log_dir": Path("runs"),
        "run_dir": None,
        "log_max_mb": DEFAULT_LOG_MAX_MB,
        "log_keep": DEFAULT_LOG_KEEP,
        "metrics_to": (),
    }
    return Settings(**{**base, **changed})  # type: ignore[arg-type]


def test_defaults_pass_nothing_and_each_set_option_is_passed_on() -> None:
    assert launcher_args(_settings()) == []
    assert launcher_args(
        _settings(grace_s=7.5, log_max_mb=2.0, log_keep=9, metrics_to=("csv", "tensorboard"))
    ) == [
        "--grace", "7.5", "--log-max-mb", "2", "--log-keep", "9",
        "--metrics-to", "csv,tensorboard",
    ]  # fmt: skip


def test_no_cap_on_the_logs_is_passed_as_zero() -> None:
    assert launcher_args(_settings(log_max_mb=None)) == ["--log-max-mb", "0"]
    assert launcher_args(_settings(log_max_mb=0.0)) == ["--log-max-mb", "0"]
