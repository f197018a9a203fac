import BLECore
import Testing

@testable import BLEHost

/// The machine's table of links: a value (a copy does not see the original's changes, nor the reverse), links
/// changed in place, handles found by value (up to 0x0FFF) and listed lowest first.
struct LinkTableTests {
    static func link(_ handle: UInt16) -> Link {
        Link(
            info: LinkInfo(
                handle: ConnectionHandle(handle), role: .central, peer: .zero, interval: 24, latency: 0,
                supervisionTimeout: 72),
            preferredMTU: 247)
    }

    @Test func addsChangesAndRemovesLinksByHandle() {
        var table = LinkTable()
        #expect(table.isEmpty && table.keys.isEmpty)
        table.insert(Self.link(0x0EFF), for: ConnectionHandle(0x0EFF))
        table.insert(Self.link(3), for: ConnectionHandle(3))
        table.insert(Self.link(0x40), for: ConnectionHandle(0x40))
        #expect(table.count == 3)
        #expect(table.keys == [ConnectionHandle(3), ConnectionHandle(0x40), ConnectionHandle(0x0EFF)])
        table[ConnectionHandle(3)]?.queuedNotifications += 2
        #expect(table[ConnectionHandle(3)]?.queuedNotifications == 2)
        #expect(table.containsHandle { table[$0]?.queuedNotifications == 2 })
        #expect(!table.containsHandle { table[$0]?.queuedNotifications == 3 })
        #expect(table[ConnectionHandle(4)] == nil && !table.contains(ConnectionHandle(4)))
        // A change through a missing handle adds nothing.
        table[ConnectionHandle(4)]?.queuedNotifications += 1
        #expect(table.count == 3 && !table.contains(ConnectionHandle(4)))
        #expect(table.removeValue(forKey: ConnectionHandle(0x40))?.info.handle == ConnectionHandle(0x40))
        #expect(table.removeValue(forKey: ConnectionHandle(0x40)) == nil)
        table.removeValue(forKey: ConnectionHandle(0x0EFF))
        #expect(table.count == 1 && table.keys == [ConnectionHandle(3)])
        #expect(table.values.map(\.info.handle) == [ConnectionHandle(3)])
        // A handle past any seen so far, out of the spec's range (12 bits are kept), is still a key.
        table.insert(Self.link(0x0FFF), for: ConnectionHandle(0x0FFF))
        #expect(table.contains(ConnectionHandle(0x0FFF)) && table.count == 2)
    }

    @Test func aCopyIsAValueOfItsOwn() {
        var original = LinkTable()
        original.insert(Self.link(1), for: ConnectionHandle(1))
        var copy = original
        copy[ConnectionHandle(1)]?.queuedNotifications = 5
        #expect(original[ConnectionHandle(1)]?.queuedNotifications == 0)
        #expect(copy[ConnectionHandle(1)]?.queuedNotifications == 5)
        original[ConnectionHandle(1)]?.pendingIndications = 1
        #expect(copy[ConnectionHandle(1)]?.pendingIndications == 0)
        copy.removeValue(forKey: ConnectionHandle(1))
        #expect(original.count == 1 && copy.isEmpty)
    }
}
