"""The library API: hermetic_blocker, with_hermetic, install_all,
uninstall_all. Keyword names follow the original hermetic package."""

import functools
import json

from hermetic import _policy, _runtime


def _settings(
    block_network=False,
    allow_localhost=False,
    allow_domains=(),
    deny_domains=(),
    allow_cidrs=(),
    deny_cidrs=(),
    allow=(),
    deny=(),
    network=None,
    block_subprocess=False,
    fs_readonly=False,
    fs_root=None,
    block_native=False,
    strict_imports=False,
    sealed=False,
    trace=False,
    report_file=None,
    resolve=None,
    socks=None,
    socks_auth=None,
):
    for name, v in (
        ("allow_domains", allow_domains),
        ("deny_domains", deny_domains),
        ("allow_cidrs", allow_cidrs),
        ("deny_cidrs", deny_cidrs),
        ("allow", allow),
        ("deny", deny),
    ):
        if isinstance(v, str):
            raise TypeError("%s: want a list of rules, not a string" % name)
    s = {}
    engaged = (
        block_network
        or allow_localhost
        or network
        or allow_domains
        or deny_domains
        or allow_cidrs
        or deny_cidrs
        or allow
        or deny
    )
    if engaged:
        # Validate here, so that a bad rule is an error at the call site.
        p = _policy.Policy(
            network=network or "",
            no_network=bool(block_network),
            allow=list(allow),
            deny=list(deny),
            allow_localhost=allow_localhost,
            allow_domains=list(allow_domains),
            allow_cidrs=list(allow_cidrs),
            deny_domains=list(deny_domains),
            deny_cidrs=list(deny_cidrs),
        )
        net = {
            "posture": p.posture,
            "allow": list(allow_domains) + list(allow_cidrs) + list(allow),
            "deny": list(deny_domains) + list(deny_cidrs) + list(deny),
            "allow_localhost": bool(allow_localhost),
        }
        if resolve:
            net["resolve"] = {k: [v] if isinstance(v, str) else list(v) for k, v in dict(resolve).items()}
        if socks:
            net["socks"] = socks
        if socks_auth:
            # (username, password) for RFC 1929; never echoed in errors.
            try:
                user, password = socks_auth
            except (TypeError, ValueError):
                raise TypeError("socks_auth: want a (username, password) pair") from None
            if not isinstance(user, str) or not isinstance(password, str):
                raise TypeError("socks_auth: want a (username, password) pair of strings")
            net["socks_user"], net["socks_password"] = user, password
        s["network"] = net
    if block_subprocess:
        s["no_subprocess"] = True
    if fs_readonly or fs_root:
        s["fs_readonly"] = True
        if fs_root:
            s["fs_root"] = str(fs_root)
    if block_native or strict_imports:
        s["block_native"] = True
    if sealed:
        s["seal"] = True
    if trace:
        s["trace"] = True
    if report_file:
        s["report_file"] = str(report_file)
    s["validate"] = True
    return json.dumps(s)


_runtime._done["library"] = True


def install_all(**kwargs):
    """Install a layer of guards for the rest of the process (or until
    uninstall_all, unless sealed). Returns a token for uninstall."""
    return _runtime.install(_settings(**kwargs))


def uninstall_all():
    """Remove every guard. Once any guard was installed with sealed=True,
    this does nothing."""
    _runtime.uninstall()


def is_sealed():
    """Whether the guards of this process can no longer be removed."""
    return bool(_runtime.state().get("sealed"))


class hermetic_blocker:
    """Guards on for the duration of a with (or async with) block.

    Nested blocks add guards; leaving a block removes only the guards it
    added, and nothing once the process is sealed."""

    def __init__(self, **kwargs):
        self._settings = _settings(**kwargs)
        self._tokens = []

    def __enter__(self):
        self._tokens.append(_runtime.install(self._settings))
        return self

    def __exit__(self, *exc):
        _runtime.uninstall(self._tokens.pop())
        return False

    async def __aenter__(self):
        return self.__enter__()

    async def __aexit__(self, *exc):
        return self.__exit__(*exc)


def with_hermetic(**kwargs):
    """Decorator: run the function (sync or async) inside hermetic_blocker."""
    settings = _settings(**kwargs)

    def decorate(fn):
        import inspect

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*a, **k):
                token = _runtime.install(settings)
                try:
                    return await fn(*a, **k)
                finally:
                    _runtime.uninstall(token)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*a, **k):
            token = _runtime.install(settings)
            try:
                return fn(*a, **k)
            finally:
                _runtime.uninstall(token)

        return wrapper

    return decorate
