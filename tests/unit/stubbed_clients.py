"""Botocore clients answered by Stubbers, for the Lambdas' unit tests: each test's stubs must all have been used."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import botocore.session
from botocore.client import BaseClient
from botocore.stub import Stubber


@contextlib.contextmanager
def stubbed(*services: str, region: str = "eu-west-1") -> Iterator[list[Stubber]]:
    """A Stubber for a fresh client of each of `services`, in order; on leaving, none may hold an unused response."""
    session = botocore.session.get_session()
    with contextlib.ExitStack() as stack:
        stubbers = [stack.enter_context(Stubber(session.create_client(name, region_name=region)))
                    for name in services]
        yield stubbers
        for stubber in stubbers:
            stubber.assert_no_pending_responses()


def published(sns: BaseClient) -> list[dict]:
    """Every message `sns` publishes from now on, read off the client's own hook (its Stubber answers the call)."""
    sent: list[dict] = []
    sns.meta.events.register("before-parameter-build.sns.Publish", lambda params, **_: sent.append(dict(params)))
    return sent
