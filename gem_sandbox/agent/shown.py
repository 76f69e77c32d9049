"""What a kernel command shows: its display data, collected beside its stdout and stderr.

A kernel writes one JSON object per line on its display pipe (:data:`.pyexec.DISPLAY_FD`):
a MIME bundle such as ``{"text/plain": "25"}`` or ``{"image/png": <base64>, "text/plain":
...}``, which reaches the host in the command's result as ``display``, in order (Jupyter's
``display_data`` and ``execute_result``; the cell's value comes as ``{"value": bundle}`` and
its place is the result's ``display_value``). The pipe is written by the code's own process, so
a bundle is output like stdout, never part of a verdict: the agent keeps at most
:data:`MAX_BYTES` of it and drops any line that is not a JSON object.
"""

import json

MAX_BYTES = 16 * 1024 * 1024  # of display data kept per command (a few hundred plots)


class Shown:
    """The display lines of one command, capped."""

    cap = MAX_BYTES

    def __init__(self):
        self.data = bytearray()
        self.total = 0

    def clear(self):
        self.data = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += data[:room]

    @property
    def truncated(self):
        return self.total > len(self.data)

    def fields(self):
        """The result's ``display`` (the bundles, in order; a line cut by the cap is left
        out) and ``display_truncated``; nothing when the command showed nothing."""
        if not self.total:
            return {}
        bundles, value = [], None
        for line in bytes(self.data).split(b"\n"):
            try:
                bundle = json.loads(line)
            except ValueError:
                continue
            if isinstance(bundle, dict) and isinstance(bundle.get("value"), dict) and len(bundle) == 1:
                value, bundle = len(bundles), bundle["value"]
            if isinstance(bundle, dict):
                bundles.append(bundle)
        fields = {"display": bundles, "display_truncated": self.truncated}
        return dict(fields, display_value=value) if value is not None else fields
