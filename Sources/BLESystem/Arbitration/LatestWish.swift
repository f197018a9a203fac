/// The latest of a wish that changes on many threads (a connect list, an advertisement), for one thread at a
/// time to hand to the host. A thread that finds another handing wishes over (or itself, when the host passes
/// an event up from inside the call) leaves its wish to that one, so the host never gets an older wish after a
/// newer one. Kept in its owner's state, under the owner's lock, so the wish and whose turn it is change
/// together.
struct LatestWish<Wish: Sendable>: Sendable {
    private var pending: Wish?
    private var sending = false

    /// Notes `wish` as the latest. True when the caller is to hand wishes over (`take` until nil); false when
    /// another turn is under way and will hand this one over.
    mutating func offer(_ wish: Wish) -> Bool {
        pending = wish
        guard !sending else { return false }
        sending = true
        return true
    }

    /// The wish to hand over next; nil, ending the turn, when there is none.
    mutating func take() -> Wish? {
        guard let next = pending else {
            sending = false
            return nil
        }
        pending = nil
        return next
    }

    /// For a reset: the wishes not handed over are dropped, and a turn under way stays under way (its loop ends
    /// when it finds nothing more).
    var droppingPending: LatestWish {
        var kept = self
        kept.pending = nil
        return kept
    }
}
