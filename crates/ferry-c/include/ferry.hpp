// ferry.hpp: a C++17 layer over ferry's C API (ferry.h). Header only; link with -lferry_c.
//
//   ferry::Node node("writer");
//   ferry::Publisher pub = node.publisher("lidar/points", ferry::Qos().transport(ferry::Transport::Shm));
//   ferry::Loan loan = pub.loan(1024);
//   std::memset(loan.data().data(), 7, loan.size());   // written in place, no copy
//   loan.send();
//
//   ferry::Subscriber sub = ferry::Node("reader").subscriber("lidar/points");
//   if (std::optional<ferry::Sample> s = sub.recv(std::chrono::milliseconds(100))) {
//       ferry::bytes_view bytes = s->data();               // read in place, until *s is destroyed
//   }
//
//   ferry::Server server = node.server("map/tile");       // a service: request and response
//   if (std::optional<ferry::Request> r = server.recv(std::chrono::milliseconds(100))) {
//       r->respond(r->data());                             // an echo
//   }
//   ferry::Client client = ferry::Node("planner").client("map/tile");
//   client.wait_for_server(std::chrono::seconds(5));
//   ferry::Response answer = client.call("tile 4 7", 8, std::chrono::seconds(1));
//
// Errors are exceptions (ferry::error, a std::runtime_error carrying the ferry_status): a
// constructor cannot return a status, and RAII types that may exist half-made would push a
// check onto every use. What is not a failure is not an exception: a receive that finds
// nothing within its timeout returns std::nullopt. (A send that times out is a failure: the
// message was not sent; so is a call that gets no response in time.) An answer whose client
// has gone is not a failure either: respond() returns ferry::Responded::ClientGone.
//
// Types: Node, Publisher, Subscriber, Loan, Sample, Server, Request, Client and Response own
// their C handle and are move-only. A Loan must be sent or destroyed (which discards it), a
// Sample, Request or Response destroyed or released (a Request may be answered instead),
// before its Publisher, Subscriber, Server or Client is: the C API refuses to free an endpoint
// while its loan, sample, request or response is out, and a destructor cannot report that (the
// endpoint would be leaked). One Loan per Publisher, one Sample per Subscriber, one Request per
// Server and one Response per Client at a time; a second is refused (ferry::error with
// FERRY_INVALID_ARGUMENT). Use each object from one thread at a time.
//
// C++17 has no std::span, so bytes are shown as ferry::bytes_view {const uint8_t*, size_t}
// and ferry::mutable_bytes_view {uint8_t*, size_t}: pointer and length, begin()/end(),
// operator[]. (Under C++20 they convert to std::span through data() and size().)
#ifndef FERRY_HPP
#define FERRY_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ferry.h"

namespace ferry {

/// A failed call: what ferry_last_error_message() said, and the status.
class error : public std::runtime_error {
public:
    error(ferry_status status, const std::string &what)
        : std::runtime_error(what), status_(status) {}
    ferry_status status() const noexcept { return status_; }

private:
    ferry_status status_;
};

namespace detail {
inline void check(ferry_status status) {
    if (status != FERRY_OK) {
        throw error(status, std::string(ferry_status_name(status)) + ": " +
                                ferry_last_error_message());
    }
}

/// Whether a receive got something: false when nothing came within its timeout
/// (FERRY_TIMEOUT, FERRY_WOULD_BLOCK, which are not failures); throws on a failure.
inline bool received(ferry_status status) {
    if (status == FERRY_TIMEOUT || status == FERRY_WOULD_BLOCK) return false;
    check(status);
    return true;
}

/// A timeout as the C API takes it: nanoseconds, a negative one as 0 (only look).
inline int64_t timeout_ns(std::chrono::nanoseconds timeout) noexcept {
    return timeout.count() < 0 ? 0 : static_cast<int64_t>(timeout.count());
}

/// Owns a C handle: move-only, and `Release` ends it (frees an endpoint, gives back what one
/// lent) when the owner is destroyed or assigned another, unless it is null.
template <typename T, auto Release>
class Owned {
public:
    explicit Owned(T *handle = nullptr) noexcept : handle_(handle) {}
    Owned(Owned &&other) noexcept : handle_(other.take()) {}
    Owned &operator=(Owned &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = other.take();
        }
        return *this;
    }
    Owned(const Owned &) = delete;
    Owned &operator=(const Owned &) = delete;
    ~Owned() { reset(); }

    T *get() const noexcept { return handle_; }
    /// Lets go of the handle without ending it.
    T *take() noexcept { return std::exchange(handle_, nullptr); }
    void reset() noexcept {
        if (handle_ != nullptr) (void)Release(take());
    }

private:
    T *handle_;
};
}  // namespace detail

/// Read-only bytes: a pointer and a length (C++17's stand-in for std::span<const uint8_t>).
struct bytes_view {
    const uint8_t *ptr = nullptr;
    std::size_t len = 0;

    const uint8_t *data() const noexcept { return ptr; }
    std::size_t size() const noexcept { return len; }
    bool empty() const noexcept { return len == 0; }
    const uint8_t *begin() const noexcept { return ptr; }
    const uint8_t *end() const noexcept { return ptr + len; }
    const uint8_t &operator[](std::size_t i) const noexcept { return ptr[i]; }
};

/// Writable bytes: a pointer and a length (std::span<uint8_t>'s stand-in).
struct mutable_bytes_view {
    uint8_t *ptr = nullptr;
    std::size_t len = 0;

    uint8_t *data() const noexcept { return ptr; }
    std::size_t size() const noexcept { return len; }
    bool empty() const noexcept { return len == 0; }
    uint8_t *begin() const noexcept { return ptr; }
    uint8_t *end() const noexcept { return ptr + len; }
    uint8_t &operator[](std::size_t i) const noexcept { return ptr[i]; }
    operator bytes_view() const noexcept { return {ptr, len}; }
};

enum class Transport : int32_t {
    Auto = FERRY_TRANSPORT_AUTO,
    Shm = FERRY_TRANSPORT_SHM,
    Udp = FERRY_TRANSPORT_UDP,
};
enum class Delivery : int32_t {
    Reliable = FERRY_DELIVERY_RELIABLE,
    Latest = FERRY_DELIVERY_LATEST,
};
enum class Wait : int32_t {
    Adaptive = FERRY_WAIT_ADAPTIVE,
    Spin = FERRY_WAIT_SPIN,
    Block = FERRY_WAIT_BLOCK,
};

/// The settings of a publisher, subscriber, server or client: ferry_qos_default(), changed in a
/// chain.
class Qos {
public:
    Qos() noexcept : raw_(ferry_qos_default()) {}
    Qos &transport(Transport t) noexcept { raw_.transport = static_cast<int32_t>(t); return *this; }
    Qos &delivery(Delivery d) noexcept { raw_.delivery = static_cast<int32_t>(d); return *this; }
    Qos &wait(Wait w) noexcept { raw_.wait = static_cast<int32_t>(w); return *this; }
    Qos &max_message_size(std::size_t bytes) noexcept { raw_.max_message_size = bytes; return *this; }
    Qos &ring_capacity(std::size_t bytes) noexcept { raw_.ring_capacity = bytes; return *this; }
    Qos &send_timeout(std::chrono::nanoseconds t) noexcept {
        raw_.send_timeout_ns = static_cast<uint64_t>(t.count() < 0 ? 0 : t.count());
        return *this;
    }
    Qos &spin_window(std::chrono::nanoseconds t) noexcept {
        raw_.spin_window_ns = static_cast<uint64_t>(t.count() < 0 ? 0 : t.count());
        return *this;
    }
    Qos &mtu(std::size_t bytes) noexcept { raw_.mtu = bytes; return *this; }
    /// UDP publisher: at most this many bits per second on the wire (0: no cap).
    Qos &max_rate(uint64_t bits_per_second) noexcept { raw_.max_rate_bps = bits_per_second; return *this; }
    /// UDP: data to a multicast group, "address:port"; the strings must outlive the calls that
    /// take this Qos (a string literal does). `interface`: an IPv4 address of it, or an IPv6
    /// interface index; nullptr leaves it to the kernel.
    Qos &multicast(const char *group, const char *interface = nullptr, uint32_t ttl = 1) noexcept {
        raw_.multicast = group;
        raw_.multicast_interface = interface;
        raw_.multicast_ttl = ttl;
        return *this;
    }
    /// The C struct, for the fields without a setter here.
    ferry_qos &raw() noexcept { return raw_; }
    const ferry_qos &raw() const noexcept { return raw_; }

private:
    ferry_qos raw_;
};

/// Room lent for one message, written in place. send() publishes it; destroying an unsent
/// Loan discards it.
class Loan {
public:
    /// The message's bytes (whatever the ring held before: write every byte you send).
    mutable_bytes_view data() const noexcept { return {ferry_loan_data(loan_.get()), ferry_loan_len(loan_.get())}; }
    std::size_t size() const noexcept { return ferry_loan_len(loan_.get()); }
    /// Publishes the message; the Loan is empty afterwards, whether or not it throws.
    void send() { detail::check(ferry_loan_send(loan_.take())); }
    /// Gives the room back unsent (what the destructor does).
    void discard() noexcept { loan_.reset(); }
    ferry_loan *get() const noexcept { return loan_.get(); }

private:
    friend class Publisher;
    explicit Loan(ferry_loan *loan) noexcept : loan_(loan) {}
    detail::Owned<ferry_loan, ferry_loan_discard> loan_;
};

class Publisher {
public:
    /// Sends a copy of the bytes.
    void send(bytes_view bytes) { detail::check(ferry_publisher_send(pub_.get(), bytes.data(), bytes.size())); }
    void send(const void *data, std::size_t len) { detail::check(ferry_publisher_send(pub_.get(), data, len)); }
    /// Lends room for a len-byte message (zero copy under shared memory).
    Loan loan(std::size_t len) {
        ferry_loan *loan = nullptr;
        detail::check(ferry_publisher_loan(pub_.get(), len, &loan));
        return Loan(loan);
    }
    std::size_t subscriber_count() {
        std::size_t n = 0;
        detail::check(ferry_publisher_subscriber_count(pub_.get(), &n));
        return n;
    }
    std::size_t max_message_size() const {
        std::size_t n = 0;
        detail::check(ferry_publisher_max_message_size(pub_.get(), &n));
        return n;
    }
    ferry_publisher *get() const noexcept { return pub_.get(); }

private:
    friend class Node;
    explicit Publisher(ferry_publisher *pub) noexcept : pub_(pub) {}
    detail::Owned<ferry_publisher, ferry_publisher_free> pub_;
};

/// A received message, read in place until it is destroyed or released.
class Sample {
public:
    bytes_view data() const noexcept { return {ferry_sample_data(sample_.get()), ferry_sample_len(sample_.get())}; }
    std::size_t size() const noexcept { return ferry_sample_len(sample_.get()); }
    /// The publisher's sequence number of the message (from 0 per publisher).
    uint64_t seq() const noexcept { return ferry_sample_seq(sample_.get()); }
    /// Messages missed just before this one (latest delivery, UDP losses).
    uint64_t skipped() const noexcept { return ferry_sample_skipped(sample_.get()); }
    /// Lets the publisher reuse the bytes now (what the destructor does).
    void release() noexcept { sample_.reset(); }
    ferry_sample *get() const noexcept { return sample_.get(); }

private:
    friend class Subscriber;
    friend class Kept;
    explicit Sample(ferry_sample *sample) noexcept : sample_(sample) {}
    detail::Owned<ferry_sample, ferry_sample_release> sample_;
};

/// A message kept past the next receive (Subscriber::keep), readable until it is destroyed
/// or let go. Destroy it before its subscriber.
class Kept {
public:
    Kept(Kept &&other) noexcept
        : sub_(other.sub_), kept_(std::exchange(other.kept_, nullptr)) {}
    Kept &operator=(Kept &&other) noexcept {
        if (this != &other) {
            let_go();
            sub_ = other.sub_;
            kept_ = std::exchange(other.kept_, nullptr);
        }
        return *this;
    }
    Kept(const Kept &) = delete;
    Kept &operator=(const Kept &) = delete;
    ~Kept() { let_go(); }

    bytes_view data() const noexcept { return {ferry_kept_data(kept_), ferry_kept_len(kept_)}; }
    std::size_t size() const noexcept { return ferry_kept_len(kept_); }
    uint64_t seq() const noexcept { return ferry_kept_seq(kept_); }
    /// Gives it back now (what the destructor does).
    void let_go() noexcept {
        if (kept_ != nullptr) (void)ferry_subscriber_let_go(sub_, std::exchange(kept_, nullptr));
    }

private:
    friend class Subscriber;
    Kept(ferry_subscriber *sub, ferry_kept *kept) noexcept : sub_(sub), kept_(kept) {}
    ferry_subscriber *sub_;
    ferry_kept *kept_;
};

class Subscriber {
public:
    /// Waits at most `timeout` for the next message (0: only looks); std::nullopt if none came.
    std::optional<Sample> recv(std::chrono::nanoseconds timeout) {
        return receive(detail::timeout_ns(timeout));
    }
    /// Waits until a message comes (it cannot be interrupted: loop over recv(timeout) to stop
    /// on a condition of your own).
    Sample recv() {
        for (;;) {
            if (std::optional<Sample> sample = receive(-1)) return std::move(*sample);
        }
    }
    std::optional<Sample> try_recv() { return receive(0); }
    /// Keeps `sample` (received from this subscriber) past the next receive: at most
    /// ferry_qos.max_held messages at once (2 by default), else an Error and the sample stays.
    Kept keep(Sample &sample) {
        ferry_kept *kept = nullptr;
        detail::check(ferry_subscriber_keep(sub_.get(), &kept));
        (void)sample.sample_.take();  // its handle is empty now
        return Kept(sub_.get(), kept);
    }
    std::size_t publisher_count() {
        std::size_t n = 0;
        detail::check(ferry_subscriber_publisher_count(sub_.get(), &n));
        return n;
    }
    ferry_subscriber *get() const noexcept { return sub_.get(); }

private:
    friend class Node;
    explicit Subscriber(ferry_subscriber *sub) noexcept : sub_(sub) {}
    std::optional<Sample> receive(int64_t timeout_ns) {
        ferry_sample *sample = nullptr;
        if (!detail::received(ferry_subscriber_recv(sub_.get(), timeout_ns, &sample))) return std::nullopt;
        return Sample(sample);
    }
    detail::Owned<ferry_subscriber, ferry_subscriber_free> sub_;
};

/// What became of an answer: sent, or dropped because its client had gone (not a failure).
enum class Responded { Sent, ClientGone };

namespace detail {
inline Responded responded(ferry_status status) {
    if (status == FERRY_CLIENT_GONE) return Responded::ClientGone;
    check(status);
    return Responded::Sent;
}
}  // namespace detail

/// A request received by a Server, read in place until it is answered, released or destroyed.
class Request {
public:
    bytes_view data() const noexcept { return {ferry_request_data(request_.get()), ferry_request_len(request_.get())}; }
    std::size_t size() const noexcept { return ferry_request_len(request_.get()); }
    /// The client that asked (its 64-bit id).
    uint64_t client() const noexcept { return ferry_request_client(request_.get()); }
    /// The request's id within its client (the low 32 bits of the id the client's send gave).
    uint64_t id() const noexcept { return ferry_request_id(request_.get()); }
    /// Answers with a copy of the bytes (the request's own are allowed: an echo). The Request
    /// is empty afterwards, whether or not it throws; after a failure (FERRY_TOO_LARGE,
    /// FERRY_TIMEOUT) Server::respond(client, id, ...) may still answer it.
    Responded respond(bytes_view bytes) { return respond(bytes.data(), bytes.size()); }
    Responded respond(const void *data, std::size_t len) {
        return detail::responded(ferry_request_respond(request_.take(), data, len));
    }
    /// Lets the request go unanswered, for an answer given later with Server::respond (keep
    /// client() and id() first); what the destructor does.
    void release() noexcept { request_.reset(); }
    ferry_request *get() const noexcept { return request_.get(); }

private:
    friend class Server;
    explicit Request(ferry_request *request) noexcept : request_(request) {}
    detail::Owned<ferry_request, ferry_request_release> request_;
};

/// The server of a service: receives requests and answers them, now or later.
class Server {
public:
    /// Waits at most `timeout` for the next request (0: only looks); std::nullopt if none came.
    std::optional<Request> recv(std::chrono::nanoseconds timeout) {
        return receive(detail::timeout_ns(timeout));
    }
    /// Waits until a request comes (loop over recv(timeout) to stop on a condition of your own).
    Request recv() {
        for (;;) {
            if (std::optional<Request> request = receive(-1)) return std::move(*request);
        }
    }
    std::optional<Request> try_recv() { return receive(0); }
    /// Answers, with a copy of the bytes, a request received earlier and released unanswered.
    Responded respond(uint64_t client, uint64_t request, bytes_view bytes) {
        return respond(client, request, bytes.data(), bytes.size());
    }
    Responded respond(uint64_t client, uint64_t request, const void *data, std::size_t len) {
        return detail::responded(ferry_server_respond(server_.get(), client, request, data, len));
    }
    ferry_server *get() const noexcept { return server_.get(); }

private:
    friend class Node;
    explicit Server(ferry_server *server) noexcept : server_(server) {}
    std::optional<Request> receive(int64_t timeout_ns) {
        ferry_request *request = nullptr;
        if (!detail::received(ferry_server_recv(server_.get(), timeout_ns, &request))) return std::nullopt;
        return Request(request);
    }
    detail::Owned<ferry_server, ferry_server_free> server_;
};

/// A response received by a Client, read in place until it is destroyed or released.
class Response {
public:
    bytes_view data() const noexcept { return {ferry_response_data(response_.get()), ferry_response_len(response_.get())}; }
    std::size_t size() const noexcept { return ferry_response_len(response_.get()); }
    /// The id of the request this answers (as Client::send gave it).
    uint64_t request_id() const noexcept { return ferry_response_request_id(response_.get()); }
    /// Lets the server reuse the bytes now (what the destructor does).
    void release() noexcept { response_.reset(); }
    ferry_response *get() const noexcept { return response_.get(); }

private:
    friend class Client;
    explicit Response(ferry_response *response) noexcept : response_(response) {}
    detail::Owned<ferry_response, ferry_response_release> response_;
};

/// A client of a service: sends requests, any number in flight, and receives their responses.
/// A request that will get no response throws ferry::error: FERRY_NO_SERVER,
/// FERRY_SERVER_GONE, FERRY_TOO_LARGE, FERRY_TIMEOUT (a call) and FERRY_MANY_SERVERS.
class Client {
public:
    /// From now on a send or call that finds no server waits up to `timeout` for one to appear
    /// (0, the default: FERRY_NO_SERVER at once). Does not wait itself.
    void wait_for_server(std::chrono::nanoseconds timeout) {
        detail::check(ferry_client_wait_for_server(client_.get(), detail::timeout_ns(timeout)));
    }
    /// Whether a server takes this client's requests now (it looks: not per message).
    bool has_server() {
        bool has = false;
        detail::check(ferry_client_has_server(client_.get(), &has));
        return has;
    }
    /// Requests sent and not yet answered (nor ended by an error).
    std::size_t pending() {
        std::size_t n = 0;
        detail::check(ferry_client_pending(client_.get(), &n));
        return n;
    }
    /// Sends a copy of the bytes as a request; returns its id (its response's request_id()).
    uint64_t send(bytes_view bytes) { return send(bytes.data(), bytes.size()); }
    uint64_t send(const void *data, std::size_t len) {
        uint64_t id = 0;
        detail::check(ferry_client_send(client_.get(), data, len, &id));
        return id;
    }
    /// Waits at most `timeout` for the response to any pending request (0: only looks);
    /// std::nullopt if none came.
    std::optional<Response> recv(std::chrono::nanoseconds timeout) {
        return receive(detail::timeout_ns(timeout));
    }
    /// Waits until a response comes (or a pending request ends with an error).
    Response recv() {
        for (;;) {
            if (std::optional<Response> response = receive(-1)) return std::move(*response);
        }
    }
    std::optional<Response> try_recv() { return receive(0); }
    /// Sends a copy of the bytes and waits at most `timeout` for the response (FERRY_TIMEOUT).
    Response call(bytes_view bytes, std::chrono::nanoseconds timeout) {
        return call(bytes.data(), bytes.size(), timeout);
    }
    Response call(const void *data, std::size_t len, std::chrono::nanoseconds timeout) {
        ferry_response *response = nullptr;
        detail::check(
            ferry_client_call(client_.get(), data, len, detail::timeout_ns(timeout), &response));
        return Response(response);
    }
    /// The request the last FERRY_SERVER_GONE, FERRY_TOO_LARGE (refused by the server) or
    /// FERRY_TIMEOUT (of a call) of recv() or call() was about; std::nullopt if none was.
    std::optional<uint64_t> failed_request() const noexcept {
        uint64_t id = 0;
        if (ferry_client_failed_request(client_.get(), &id) != FERRY_OK) return std::nullopt;
        return id;
    }
    ferry_client *get() const noexcept { return client_.get(); }

private:
    friend class Node;
    explicit Client(ferry_client *client) noexcept : client_(client) {}
    std::optional<Response> receive(int64_t timeout_ns) {
        ferry_response *response = nullptr;
        if (!detail::received(ferry_client_recv(client_.get(), timeout_ns, &response))) return std::nullopt;
        return Response(response);
    }
    detail::Owned<ferry_client, ferry_client_free> client_;
};

/// One thread waiting on any number of subscribers, servers and clients at once, without
/// spinning: add them, then wait; the wait says which are ready (a message, a request, a
/// response or a request's end waits; a subscriber's deadline passed) and takes nothing —
/// receive from those afterwards. The wait set holds pointers to what was added: they must
/// outlive it (or the next clear()). Use it from one thread at a time.
class WaitSet {
public:
    WaitSet() : set_(made()) {}

    /// Adds an item; its index (in the order added) is what wait() reports.
    std::size_t add(Subscriber &sub) { return push(FERRY_WAIT_SUBSCRIBER, sub.get()); }
    std::size_t add(Server &server) { return push(FERRY_WAIT_SERVER, server.get()); }
    std::size_t add(Client &client) { return push(FERRY_WAIT_CLIENT, client.get()); }
    std::size_t size() const noexcept { return items_.size(); }
    void clear() noexcept { items_.clear(); }

    /// Waits at most `timeout` (0: only looks) until at least one item is ready; the indices
    /// of those ready, in order, or none when the time ran out. An item that holds a sample,
    /// request or response, or an item added twice, is an error.
    std::vector<std::size_t> wait(std::chrono::nanoseconds timeout) {
        return wait_ns(detail::timeout_ns(timeout));
    }
    /// Waits until one is ready.
    std::vector<std::size_t> wait() { return wait_ns(-1); }

private:
    std::size_t push(int32_t kind, void *handle) {
        items_.push_back(ferry_wait_item{kind, handle});
        return items_.size() - 1;
    }
    std::vector<std::size_t> wait_ns(int64_t timeout_ns) {
        std::vector<std::size_t> ready(items_.size());
        std::size_t n = 0;
        ferry_status status = ferry_waitset_wait(set_.get(), items_.data(), items_.size(),
                                                 timeout_ns, ready.data(), ready.size(), &n);
        if (status == FERRY_TIMEOUT) return {};
        detail::check(status);
        ready.resize(n < ready.size() ? n : ready.size());
        return ready;
    }
    static ferry_waitset *made() {
        ferry_waitset *set = nullptr;
        detail::check(ferry_waitset_new(&set));
        return set;
    }
    detail::Owned<ferry_waitset, ferry_waitset_free> set_;
    std::vector<ferry_wait_item> items_;
};

/// One participant with a name. Its publishers, subscribers, servers and clients may outlive
/// it.
class Node {
public:
    /// In the domain $FERRY_DOMAIN (else "default"), set up as the FERRY_* variables say.
    explicit Node(const std::string &name) : node_(made(name.c_str(), nullptr)) {}
    /// In `domain`; the other settings from the FERRY_* variables.
    Node(const std::string &name, const std::string &domain)
        : node_(made(name.c_str(), domain.c_str())) {}

    Publisher publisher(const std::string &topic, const Qos &qos = Qos()) const {
        ferry_publisher *pub = nullptr;
        detail::check(ferry_publisher_new(node_.get(), topic.c_str(), &qos.raw(), &pub));
        return Publisher(pub);
    }
    Subscriber subscriber(const std::string &topic, const Qos &qos = Qos()) const {
        ferry_subscriber *sub = nullptr;
        detail::check(ferry_subscriber_new(node_.get(), topic.c_str(), &qos.raw(), &sub));
        return Subscriber(sub);
    }
    /// The server of `service` (FERRY_SERVICE_TAKEN when it has one on this host). Requests
    /// larger than the QoS's max_message_size are refused (their clients see FERRY_TOO_LARGE).
    Server server(const std::string &service, const Qos &qos = Qos()) const {
        ferry_server *server = nullptr;
        detail::check(ferry_server_new(node_.get(), service.c_str(), &qos.raw(), &server));
        return Server(server);
    }
    /// A client of `service`; its requests may be up to the QoS's max_message_size.
    Client client(const std::string &service, const Qos &qos = Qos()) const {
        ferry_client *client = nullptr;
        detail::check(ferry_client_new(node_.get(), service.c_str(), &qos.raw(), &client));
        return Client(client);
    }
    ferry_node *get() const noexcept { return node_.get(); }

private:
    static ferry_node *made(const char *name, const char *domain) {
        ferry_node *node = nullptr;
        detail::check(ferry_node_new(name, domain, &node));
        return node;
    }
    detail::Owned<ferry_node, ferry_node_free> node_;
};

}  // namespace ferry

#endif  // FERRY_HPP
