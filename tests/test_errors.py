"""One error tree: every deliberate error lives in clawkb.errors and carries its
HTTP status, code and CLI exit status; the front ends read those attributes."""

from __future__ import annotations

import importlib
import pkgutil

import click
import pytest
from click.testing import CliRunner

import clawkb
from clawkb import errors
from clawkb.cli.common import handle_errors
from clawkb.errors import ClawkbError
from clawkb.server.errors import error_for


def _all_subclasses(cls: type[Exception]) -> set[type[Exception]]:
    out: set[type[Exception]] = set()
    sub: type[Exception]
    for sub in cls.__subclasses__():
        out |= {sub, *_all_subclasses(sub)}
    return out


def test_every_clawkb_error_is_defined_in_errors_module() -> None:
    for info in pkgutil.walk_packages(clawkb.__path__, "clawkb."):
        if ".vendor" in info.name or info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # an optional extra missing here: its errors are checked where it is
            continue
    outside = sorted(
        f"{c.__module__}.{c.__qualname__}"
        for c in _all_subclasses(ClawkbError)
        if c.__module__.startswith("clawkb.") and c.__module__ != "clawkb.errors"
    )
    assert outside == []


@pytest.mark.parametrize(
    ("name", "status", "code"),
    [
        ("ConfigError", 400, "bad_request"),
        ("PathOutsideRoots", 403, "outside_roots"),
        ("UploadTooLarge", 413, "too_large"),
        ("NotFoundError", 404, "not_found"),
        ("LockedError", 503, "locked"),
        ("StoreError", 500, "store_error"),
        ("LLMError", 502, "llm_error"),
        ("BackendError", 502, "backend_error"),
        ("EndpointError", 502, "endpoint_error"),
        ("IndexCorruptError", 400, "error"),
    ],
)
def test_http_layer_uses_the_error_attributes(name: str, status: int, code: str) -> None:
    exc = getattr(errors, name)("what went wrong")
    assert error_for(exc) == (status, code, "what went wrong")


def test_old_import_paths_still_name_the_same_classes() -> None:
    from clawkb.backends.milvus_schema import BackendError
    from clawkb.embed.openai import EndpointError
    from clawkb.index.generations import IndexCorruptError
    from clawkb.llm import LLMError
    from clawkb.server.api_write import UploadTooLarge
    from clawkb.server.security import PathOutsideRoots

    assert LLMError is errors.LLMError and BackendError is errors.BackendError
    assert EndpointError is errors.EndpointError and IndexCorruptError is errors.IndexCorruptError
    assert UploadTooLarge is errors.UploadTooLarge and PathOutsideRoots is errors.PathOutsideRoots


class Teapot(ClawkbError):
    """A new error needs only its attributes to reach both front ends."""

    http_status = 418
    code = "teapot"
    exit_code = 7


def test_a_new_error_needs_no_front_end_change() -> None:
    assert error_for(Teapot("short and stout")) == (418, "teapot", "short and stout")

    @click.command()
    @handle_errors
    def brew() -> None:
        raise Teapot("short and stout")

    result = CliRunner().invoke(brew, [])
    assert result.exit_code == 7
    assert "error: short and stout" in result.output


def test_cli_exit_status_of_an_ordinary_error_is_two() -> None:
    @click.command()
    @handle_errors
    def fail() -> None:
        raise errors.LLMError("endpoint down")

    result = CliRunner().invoke(fail, [])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1


def test_unexpected_exceptions_stay_internal() -> None:
    status, code, message = error_for(KeyError("secret detail"))
    assert (status, code) == (500, "internal") and "secret" not in message
