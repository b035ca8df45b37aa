//! UDP sockets (filled in by the socket-layer work).
