"""Admin fixtures: staff users with chosen permissions, logged in through the test client."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

VIEW = ["view_job", "view_quarantinedjob", "view_deadletteredjob", "view_queuesettings", "view_pumpstatus"]
OPERATOR = [*VIEW, "requeue_job", "cancel_job", "pause_queue", "view_job_payload"]


@pytest.fixture
def login(db: None, client: Client) -> Callable[..., Client]:
    """``login(*codenames)``: a staff user with exactly these backwave_django permissions, logged in."""

    def make(*codenames: str, username: str = "ops") -> Client:
        user = User.objects.create(username=username, is_staff=True)
        permissions = Permission.objects.filter(
            content_type__app_label="backwave_django", codename__in=codenames
        )
        assert permissions.count() == len(set(codenames)), f"unknown permission among {codenames}"
        user.user_permissions.set(permissions)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def viewer(login: Callable[..., Client]) -> Client:
    return login(*VIEW, username="viewer")


@pytest.fixture
def operator(login: Callable[..., Client]) -> Client:
    return login(*OPERATOR, username="operator")
