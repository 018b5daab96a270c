"""hermetic's Python guards: network, subprocess, filesystem and native-code
guards resting on an audit hook (PEP 578).

Under the hermetic launcher the guards are installed before the program
starts (sitecustomize). The same package is a library:

    from hermetic import hermetic_blocker, PolicyViolation

    with hermetic_blocker(block_network=True, allow_domains=["pypi.org"]):
        ...

An uncaught PolicyViolation ends the process with exit status 2 and one line
on stderr: "hermetic: blocked <guard>: <target>".
"""

__all__ = [
    "PolicyViolation",
    "hermetic_blocker",
    "with_hermetic",
    "install_all",
    "uninstall_all",
    "is_sealed",
]


class PolicyViolation(Exception):
    """A guard refused an action.

    guard names what was refused (socket.connect, socket.getaddrinfo, open,
    subprocess.Popen, import, ...), target what it was refused for (a
    host:port, a path, an executable, a module) and reason why (the policy's
    reason for network decisions: no-network, not-allowlisted, ...; or
    fs-readonly, outside-root, no-subprocess, block-native, sealed).
    """

    guard = ""
    target = ""
    reason = ""

    def __init__(self, message="", guard="", target="", reason=""):
        super().__init__(message)
        self.guard = guard
        self.target = target
        self.reason = reason


def __getattr__(name):
    # The library API is loaded on first use: under the launcher start-up
    # needs only the engine.
    if name in ("hermetic_blocker", "with_hermetic", "install_all", "uninstall_all", "is_sealed"):
        from hermetic import _api

        return getattr(_api, name)
    raise AttributeError("module 'hermetic' has no attribute %r" % name)
