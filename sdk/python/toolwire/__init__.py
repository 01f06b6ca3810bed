"""toolwire: a client of a toolwire dispatcher for Python agent services.

The standard library only (http.client, json, asyncio, dataclasses), over
the dispatcher's Connect API with JSON::

    from toolwire import Client
    tw = Client("http://127.0.0.1:8080", api_key="...")
    print(tw.call("echo", {"text": "hello"}).text)

``Client`` is synchronous; ``AsyncClient`` (toolwire.aio) has the same
methods as coroutines, and ``watch`` as an async iterator. The errors are
in toolwire.errors and the message types in toolwire.types.
"""

from .aio import AsyncClient
from .client import Client
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors
from .types import *  # noqa: F401,F403
from .types import __all__ as _types

__version__ = "0.1.0"
__all__ = ["Client", "AsyncClient", "__version__"] + list(_errors) + list(_types)
