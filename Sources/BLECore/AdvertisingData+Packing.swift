extension AdvertisingData {
    /// Advertising data carrying a local name and service UUIDs, packed into `maximumLength` octets (31 for
    /// legacy advertising) the way a peripheral that wants to be found does it.
    ///
    /// The order of precedence:
    /// 1. `flags` first (3 octets), unless `nil` (a non-discoverable or scan-response payload).
    /// 2. Service UUIDs, because scanners filter on them: one list per width, 16-bit first (cheapest), then
    ///    32-bit, then 128-bit, each taking as many UUIDs as still fit, in the given order. If any UUID had to be
    ///    left out, every list uses the "incomplete" AD type, so a scanner knows to look further (for example
    ///    by connecting and discovering services); otherwise the lists are "complete".
    /// 3. The local name in the space left: the Complete Local Name if it fits, otherwise a Shortened Local Name
    ///    made of the leading characters that fit (never cutting a character in its UTF-8 encoding), or no name
    ///    if not even one character fits.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.1 (complete and incomplete lists), 1.2
    ///   (a shortened name holds contiguous characters from the beginning of the full name).
    public static func packed(
        localName: String?,
        serviceUUIDs: [BluetoothUUID],
        flags: ADFlags? = .leOnlyGeneralDiscoverable,
        maximumLength: Int = AdvertisingData.legacyMaximumLength
    ) -> AdvertisingData {
        var data = AdvertisingData()
        var room = maximumLength

        if let flags, room >= 3 {
            data.addFlags(flags)
            room -= 3
        }

        var seen: Set<BluetoothUUID> = []
        let unique = serviceUUIDs.filter { seen.insert($0).inserted }
        var lists: [(width: BluetoothUUID.Width, uuids: [BluetoothUUID])] = []
        var truncated = false
        for width in [BluetoothUUID.Width.bits16, .bits32, .bits128] {
            let group = unique.filter { $0.width == width }
            guard !group.isEmpty else { continue }
            let size = width.rawValue
            let fitting = min(group.count, max(0, room - 2) / size, ADStructure.maximumDataLength / size)
            if fitting < group.count { truncated = true }
            guard fitting > 0 else { continue }
            lists.append((width, Array(group.prefix(fitting))))
            room -= 2 + fitting * size
        }
        for list in lists {
            data.addServiceUUIDs(list.uuids, complete: !truncated)
        }

        if let localName, !localName.isEmpty, room >= 3 {
            let limit = min(room - 2, ADStructure.maximumDataLength)
            if localName.utf8.count <= limit {
                data.addLocalName(localName, complete: true)
            } else {
                var shortened = ""
                var used = 0
                for character in localName {
                    let size = character.utf8.count
                    guard used + size <= limit else { break }
                    shortened.append(character)
                    used += size
                }
                if !shortened.isEmpty { data.addLocalName(shortened, complete: false) }
            }
        }
        return data
    }
}
