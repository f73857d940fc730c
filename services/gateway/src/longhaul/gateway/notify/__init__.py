"""Notifications to operator-configured webhooks (``notify:``), hosted by the gateway:
:mod:`.notices` (what is told), :mod:`.bodies` (how it reads), :mod:`.sender` (one
attempt, the backoff), :mod:`.notifier` (the consumer that delivers at least once)."""
