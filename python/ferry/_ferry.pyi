"""Type stubs of ferry's extension module (python/src/)."""

import builtins
from types import TracebackType
from typing import Any, Dict, Iterator, List, Literal, Optional, Sequence, Tuple, Type, Union

from typing_extensions import Buffer, Self

__version__: str
WAIT_SLICE_S: float

class FerryError(Exception):
    """An error of ferry; the message says what went wrong and what to do."""

class TimeoutError(FerryError, builtins.TimeoutError):
    """Nothing arrived, or no room was made, within the time given."""

class BufferInUseError(FerryError, BufferError):
    """A sample or loan cannot be handed back while memoryviews or arrays of it exist."""

class ReleasedError(FerryError, ValueError):
    """The memory of a released sample, or of a sent or discarded loan, was used."""

class NoServerError(FerryError, ConnectionError):
    """A service has no server to take a request (raised at once by a send without one; see
    Client.wait_for_server)."""

    service: str

class ServerGoneError(FerryError, ConnectionError):
    """A service's server went away (its process ended, or it was no longer heard from) before
    it answered a request."""

    service: str
    request: int
    """The id of the request it left unanswered."""

class TooLargeError(FerryError, ValueError):
    """A request or response is larger than its end takes (Qos.max_message_size): the client's
    own limit (`request` is None), the server's (the server refused request `request`), or a
    response larger than the server sends."""

    len: int
    max: int
    request: Optional[int]

Transport = Literal["auto", "shm", "udp"]
Delivery = Literal["reliable", "latest"]
Wait = Literal["spin", "block", "adaptive"]

class TopicType:
    def __init__(
        self,
        name: str,
        encoding: Literal["cdr", "protobuf", "json", "raw"] = "cdr",
        schema: Union[str, bytes, None] = None,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def encoding(self) -> str: ...
    @property
    def schema_encoding(self) -> str: ...
    @property
    def schema(self) -> bytes: ...
    @property
    def hash(self) -> int: ...

class Qos:
    def __init__(
        self,
        *,
        transport: Transport = "auto",
        delivery: Delivery = "reliable",
        wait: Wait = "adaptive",
        max_message_size: Optional[int] = None,
        ring_capacity: Optional[int] = None,
        max_ring_capacity: Optional[int] = None,
        send_timeout: Optional[float] = None,
        spin_window: Optional[float] = None,
        mtu: Optional[int] = None,
        ip_version: Literal["v4", "v6"] = "v4",
        max_sessions: Optional[int] = None,
        max_receivers: Optional[int] = None,
        max_rate: Optional[int] = None,
        multicast: Optional[str] = None,
        multicast_interface: Optional[str] = None,
        multicast_ttl: int = 1,
        deadline: Optional[float] = None,
        history: int = 0,
        lease: Optional[float] = None,
        max_held: Optional[int] = None,
        topic_type: Optional[TopicType] = None,
    ) -> None: ...
    @property
    def topic_type(self) -> Optional[TopicType]: ...
    @property
    def transport(self) -> Transport: ...
    @property
    def delivery(self) -> Delivery: ...
    @property
    def wait(self) -> Wait: ...
    @property
    def max_message_size(self) -> int: ...
    @property
    def ring_capacity(self) -> int: ...
    @property
    def max_ring_capacity(self) -> int: ...
    @property
    def send_timeout(self) -> float: ...
    @property
    def spin_window(self) -> float: ...
    @property
    def mtu(self) -> int: ...
    @property
    def ip_version(self) -> Literal["v4", "v6"]: ...
    @property
    def max_sessions(self) -> int: ...
    @property
    def max_receivers(self) -> int: ...
    @property
    def multicast(self) -> Optional[str]:
        """UDP: the group data goes to, "address:port" ("239.255.1.1:7400", "[ff02::1:2]:7400"),
        or None. Subscribers join it; repairs go to it too."""
    @property
    def multicast_interface(self) -> Optional[str]:
        """UDP: the interface the group is joined and sent on (an IPv4 address of it, or an IPv6
        interface index; "0.0.0.0" / "0": the kernel's choice), or None without a group."""
    @property
    def multicast_ttl(self) -> Optional[int]:
        """UDP: the TTL or hop limit of multicast data (1: the local network), or None."""
    @property
    def max_rate(self) -> Optional[int]:
        """UDP publisher: the most bits per second it puts on the wire (its frames, repairs
        included), or None for no cap. A cap below 8000 is refused when the publisher is made."""
    @property
    def max_held(self) -> int:
        """Subscriber: samples it holds at once while memoryviews or arrays of them exist, the
        latest included (1 to 512; 2 by default, so that `b = np.frombuffer(sub.recv())` in a
        loop works). A sample is given back once its views are gone, at the next call."""
    @property
    def lease(self) -> float:
        """UDP subscriber: a publisher not heard from for this many seconds (0.3 to 3600; 3 by
        default) is gone ("silent"). Idle publishers send a heartbeat at least every 0.1 s."""
    @property
    def deadline(self) -> Optional[float]:
        """The period (seconds, 0.001 to 3600) within which a subscriber expects a message and a
        publisher means to send; each period that passes without one is counted. None: none."""
    @property
    def history(self) -> int:
        """A publisher keeps its last `history` messages (shared memory: as many as its ring
        holds); a subscriber that starts later takes the last `history` of them first, then the
        live ones, with no gap. 0: none. At most 65536; over UDP the publisher keeps them in
        its retransmit window (within 64 MiB) and a subscriber takes at most 8192 (a
        transport="udp" end asking more is refused)."""

class _Closable:
    """A context manager whose exit closes it (close, discard or release) and lets an exception
    through. The base classes named with _ are this stub's alone: at run time each class has
    these methods itself (python/src/closable.rs writes them)."""

    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class _End(_Closable):
    """A publisher, subscriber, client or server: closed by close()."""

    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...

class _Lent(_Closable, Buffer):
    """A loan or a sample: a region of the ring lent through the buffer protocol, no copy."""

    @property
    def released(self) -> bool: ...
    @property
    def views(self) -> int: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class Node:
    def __init__(self, name: str, domain: Optional[str] = None) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def domain(self) -> str: ...
    @property
    def keyed(self) -> bool: ...
    def publisher(self, topic: str, qos: Optional[Qos] = None) -> Publisher: ...
    def subscriber(self, topic: str, qos: Optional[Qos] = None) -> Subscriber: ...
    def server(self, service: str, qos: Optional[Qos] = None) -> Server:
        """The server of `service` (1 to 64 letters, digits and _ - . /). qos.max_message_size is
        the largest request it takes and response it sends; delivery is always reliable. Raises
        FerryError when the service has a server on this host already."""
    def client(self, service: str, qos: Optional[Qos] = None) -> Client:
        """A client of `service`. qos.max_message_size is the largest request it sends;
        delivery is always reliable."""

class Publisher(_End):
    @property
    def topic(self) -> str: ...
    @property
    def max_message_size(self) -> int: ...
    @property
    def subscriber_count(self) -> int: ...
    @property
    def sent(self) -> int: ...
    def send(self, data: Buffer) -> None: ...
    def send_message(self, message: Dict[str, Any]) -> None: ...
    def send_array(self, array: Buffer) -> None: ...
    def loan(self, n: int) -> Loan: ...

class Loan(_Lent):
    def send(self) -> None: ...
    def discard(self) -> None: ...
    def array(self, dtype: Any = None) -> Any:
        """A writable numpy.ndarray of dtype over the loan (no copy)."""

class Subscriber(_End):
    @property
    def topic(self) -> str: ...
    @property
    def publisher_count(self) -> int: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def refused_publishers(self) -> List[str]: ...
    @property
    def events_dropped(self) -> int: ...
    @property
    def deadline_missed(self) -> int:
        """With a deadline: the periods that passed without a message so far."""
    def try_event(self) -> Optional[Tuple[Any, ...]]:
        """The next publisher event, or None: ("appeared", publisher), ("gone", publisher, why)
        with why "closed", "died", "silent" or "evicted", or ("deadline-missed", count)."""
    def recv(self, timeout: Optional[float] = None) -> Sample: ...
    def try_recv(self) -> Optional[Sample]: ...
    async def recv_async(self, timeout: Optional[float] = None) -> Sample:
        """Waits for the next message in asyncio (the event loop's wait, through a file
        descriptor; no thread held); TimeoutError when `timeout` s pass first."""
    def _arm(self) -> Optional[Tuple[int, Optional[float]]]: ...
    def _disarm(self) -> None: ...
    def recv_bytes(self, timeout: Optional[float] = None) -> bytes:
        """A copy of the next message: the quickest way to read small ones."""
    def recv_message(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The next message decoded by the topic's type, as a dict of its fields in their
        declared order; ferry.TimeoutError when `timeout` seconds pass first, ferry.FerryError
        when the topic has no type ferry decodes or the message does not decode."""
    @property
    def topic_type(self) -> Optional[TopicType]:
        """The topic's type, if an end of this host declared one."""
    def recv_array(self, dtype: Any, timeout: Optional[float] = None) -> Any:
        """A read-only numpy.ndarray of dtype viewing the next sample (no copy)."""
    def __iter__(self) -> Iterator[Sample]: ...
    def __next__(self) -> Sample: ...

class Sample(_Lent):
    @property
    def seq(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    def release(self) -> None: ...
    def array(self, dtype: Any = None) -> Any:
        """A read-only numpy.ndarray of dtype viewing the sample (no copy)."""

class Client(_End):
    """Calls a service: sends requests (any number in flight) and receives their responses.
    Requests are any C-contiguous buffer (bytes, bytearray, memoryview, numpy array), copied
    into the ring; responses are copies (bytes), not lent in place. Waits release the GIL and
    Ctrl-C interrupts them. One thread at a time (another raises FerryError)."""

    @property
    def service(self) -> str: ...
    @property
    def id(self) -> int:
        """This client's id (64 random bits), as the server sees it (Request.client)."""
    @property
    def pending(self) -> int:
        """Requests sent whose response (or error) has not been received yet."""
    @property
    def has_server(self) -> bool:
        """Whether a server takes this client's requests now."""
    def wait_for_server(self, timeout: Optional[float] = None) -> bool:
        """Waits until a server takes requests: True, or False when `timeout` s passed first."""
    def send_request(self, data: Buffer) -> int:
        """Sends a copy of `data` as a request; its id, as recv_response reports it. Raises
        NoServerError at once without a server, TooLargeError above Qos.max_message_size."""
    def call(self, data: Buffer, timeout: Optional[float] = None) -> bytes:
        """Sends `data` and waits for its response (a copy). Raises TimeoutError when `timeout`
        s pass first (a late response is dropped), NoServerError, ServerGoneError when the server
        goes away first, TooLargeError. Responses to other requests that arrive meanwhile are
        kept for recv_response."""
    def call_array(self, data: Buffer, dtype: Any, timeout: Optional[float] = None) -> Any:
        """As call, the response as a writable numpy.ndarray of dtype (over a copy)."""
    def recv_response(self, timeout: Optional[float] = None) -> Tuple[int, bytes]:
        """The response to any pending request: (request id, body). Raises TimeoutError when
        `timeout` s pass first, ServerGoneError (its .request says which) for each request the
        server can no longer answer, FerryError when none is pending."""
    def try_recv_response(self) -> Optional[Tuple[int, bytes]]:
        """As recv_response without waiting: None when no response is there."""

class Server(_End):
    """Serves a service: receives requests and answers each, now or later, in any order. One
    server per service on a host. One thread at a time (another raises FerryError): answer on
    the thread that receives."""

    @property
    def service(self) -> str: ...
    @property
    def client_count(self) -> int:
        """Clients this server has answered and that are still there."""
    def recv_request(self, timeout: Optional[float] = None) -> Request:
        """Waits for the next request (a copy); raises TimeoutError when `timeout` s pass first."""
    def try_recv_request(self) -> Optional[Request]: ...
    def respond(self, to: Union[Request, ReplyTo], data: Buffer) -> bool:
        """Answers a request (or its reply_to, kept to answer later) with a copy of `data`:
        True when sent, False when its client had gone (the answer is dropped). A reply_to is
        not checked for an answer given already: a second answer is sent, and its client drops
        it (counted in `ferry stats` as malformed)."""
    def __iter__(self) -> Iterator[Request]: ...
    def __next__(self) -> Request: ...

class Request:
    """A request a server received: a copy of its body, who asked, and where the answer goes."""

    @property
    def data(self) -> bytes: ...
    @property
    def client(self) -> int:
        """The id of the client that asked (Client.id)."""
    @property
    def id(self) -> int:
        """The request's id: the low 32 bits of what Client.send_request returned."""
    @property
    def reply_to(self) -> ReplyTo: ...
    @property
    def answered(self) -> bool: ...
    def respond(self, data: Buffer) -> bool:
        """Answers with a copy of `data`: True when sent, False when the client had gone. A
        request is answered once (again raises FerryError)."""
    def array(self, dtype: Any = None) -> Any:
        """A read-only numpy.ndarray of dtype over the body."""
    def __bytes__(self) -> bytes: ...
    def __len__(self) -> int: ...
    def __bool__(self) -> bool:
        """True, even for an empty body (`if r := server.try_recv_request():` sees every one)."""

class ReplyTo:
    """Where an answer goes (a client and one of its requests); hashable. Answer with
    Server.respond(reply_to, data)."""

    @property
    def client(self) -> int: ...
    @property
    def request(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class WaitSet:
    """One thread waiting on many subscribers, servers and clients: wait(items, timeout)
    returns the indices of the items ready (a message, a request, a response waiting), in order,
    or [] when `timeout` seconds passed first. Ready items stay ready until what they hold is
    taken (try_recv, try_recv_request, try_recv_response). Ctrl-C interrupts the wait."""

    def __init__(self) -> None: ...
    def wait(
        self,
        items: Sequence[Union[Subscriber, Server, Client]],
        timeout: Optional[float] = None,
    ) -> List[int]: ...

def topics(domain: Optional[str] = None) -> List[Dict[str, Any]]: ...
def stats(topic: Optional[str] = None, domain: Optional[str] = None) -> List[Dict[str, Any]]: ...
