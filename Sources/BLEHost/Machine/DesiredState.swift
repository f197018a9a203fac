/// What a desired-versus-controller machine (``ScanMachine``, ``AdvertisingMachine``) asks of the host.
enum DesiredStateOutput<Command: Sendable & Hashable>: Sendable, Equatable {
    /// Send this command; answer it with the machine's `answered(_:)`.
    case send(Command)
    /// The request with this id is over.
    case complete(HostOperationID, Result<Void, HostError>)

    static func == (a: Self, b: Self) -> Bool {
        switch (a, b) {
        case (.send(let x), .send(let y)): x == y
        case (.complete(let x, .success), .complete(let y, .success)): x == y
        case (.complete(let x, .failure(let e)), .complete(let y, .failure(let f))): x == y && e == f
        default: false
        }
    }
}

/// The bookkeeping the scan and advertising machines share: what the layer above wants (`desired`, nil for
/// "off"), the requests waiting for the controller to get there, and the one command on the wire with the wish
/// it was sent for. The machines keep what the controller holds and choose the next command; this decides who
/// hears what.
///
/// A request overtaken before it took effect completes at once: with `HostError.Code.cancelled` when it asked
/// for something on, with success when it asked for off (nothing was left on on its account). A command that
/// fails fails the waiting requests only if it was sent for what is still desired (`giveUp`).
struct DesiredState<Wish: Sendable & Hashable, Command: Sendable & Hashable>: Sendable {
    typealias Output = DesiredStateOutput<Command>

    private(set) var desired: Wish?
    /// The command on the wire, if any, and the wish it was sent for.
    private(set) var sent: (command: Command, wish: Wish?)?
    /// Requests waiting for the controller; all want `desired` (the others were overtaken when it changed).
    private var waiting: [(id: HostOperationID, wants: Wish?)] = []

    var hasWaiting: Bool { !waiting.isEmpty }

    /// A request for `wish` (nil: off). `overtaken` is the message of the requests it overtakes.
    mutating func request(_ wish: Wish?, id: HostOperationID, overtaken: String) -> [Output] {
        let out = change(to: wish, overtaken: overtaken)
        waiting.append((id, wish))
        return out
    }

    /// `desired` changes without a request (the controller stopped on its own): requests for something else are
    /// overtaken.
    mutating func change(to wish: Wish?, overtaken: String) -> [Output] {
        desired = wish
        var out: [Output] = []
        waiting.removeAll { request in
            guard request.wants != wish else { return false }
            out.append(
                .complete(request.id, request.wants == nil ? .success(()) : .failure(HostError(.cancelled, overtaken))))
            return true
        }
        return out
    }

    /// The command on the wire was answered (or timed out): it is no longer in flight.
    mutating func takeSent() -> (command: Command, wish: Wish?)? {
        defer { sent = nil }
        return sent
    }

    /// A command sent for `wish` failed: if that is still what is desired, the controller will not do it, so the
    /// requests waiting fail and the wish is dropped rather than retried for ever.
    mutating func giveUp(_ wish: Wish?, _ error: HostError) -> [Output] {
        guard wish == desired else { return [] }
        let failed = waiting.map { Output.complete($0.id, .failure(error)) }
        waiting = []
        desired = nil
        return failed
    }

    /// Unless a command is in flight: sends `next`, or, when there is nothing left to do (`next` nil), completes
    /// every waiting request.
    mutating func advance(_ next: Command?) -> [Output] {
        guard sent == nil else { return [] }
        if let next {
            sent = (next, desired)
            return [.send(next)]
        }
        let done = waiting
        waiting = []
        return done.map { .complete($0.id, .success(())) }
    }

    /// The transport closed: every waiting request fails with `error`; nothing is in flight or desired any more.
    mutating func closed(_ error: HostError) -> [Output] {
        let out = waiting.map { Output.complete($0.id, .failure(error)) }
        waiting = []
        sent = nil
        desired = nil
        return out
    }
}
