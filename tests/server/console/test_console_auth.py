"""--console-auth: the effective mode and the option's checks."""

from __future__ import annotations

import pytest

from cubequeue.server.config import Config
from cubequeue.server.console import console_auth_mode
from cubequeue.server.options import ConfigError, load_config


@pytest.mark.parametrize(("auth", "option", "mode"), [
    ("trust", None, "none"),
    ("md5", None, "basic"),
    ("scram-sha-256", None, "basic"),
    ("md5", "none", "none"),
    ("trust", "basic", "basic"),
    ("md5", "off", "off"),
])
def test_effective_mode(auth, option, mode) -> None:
    assert console_auth_mode(Config(auth=auth, password="pw", console_auth=option)) == mode


def test_option_flag_and_environment() -> None:
    assert load_config(["--console-auth", "OFF"], {}).console_auth == "off"
    assert load_config([], {"CUBEQUEUE_CONSOLE_AUTH": "none"}).console_auth == "none"
    assert load_config([], {}).console_auth is None


def test_bad_values_name_the_option() -> None:
    with pytest.raises(ConfigError, match=r"--console-auth.*must be one of none, basic, off"):
        load_config(["--console-auth", "open"], {})
    with pytest.raises(ConfigError, match="--console-auth: 'basic' needs --password"):
        load_config(["--console-auth", "basic"], {})
