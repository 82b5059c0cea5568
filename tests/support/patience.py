"""How long a test waits for something that must happen: a server to listen, a fake to answer,
a child process to finish. Only a hung test ever waits this long, so the bound is generous. A
loaded 2-CPU machine is many times slower than an idle one, and no test may depend on speed.

A test whose subject is a timeout does not use this: it makes the other side wait on an event
until the client gives up, so the outcome does not depend on how fast either side runs."""

from __future__ import annotations

PATIENCE = 60.0  # seconds; a bound for one awaited event, not an expected duration
