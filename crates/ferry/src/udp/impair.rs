//! Loss injection (filled in by the socket-layer work).
