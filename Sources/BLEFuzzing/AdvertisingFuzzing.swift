import BLECore

extension FuzzTarget {
    /// Advertising or scan response data from a peer's report into `AdvertisingData`, strictly and leniently,
    /// and through every typed view a scanner reads (names, services, manufacturer and service data, iBeacon,
    /// Eddystone, Apple's overflow area). What decodes is the input up to its end or its first zero length
    /// octet, and decodes again to itself; the lenient decoder keeps what the strict one keeps.
    static let advertisingData = FuzzTarget("advertising-data", "AD structures into AdvertisingData and its views") {
        input throws(Violation) in
        let lenient = AdvertisingData(leniently: input)
        readEveryView(lenient)
        let data: AdvertisingData
        do throws(AdvertisingDataError) {
            data = try AdvertisingData(decoding: input)
        } catch {
            try expect(error.code == .structureOverrun, "a refusal that is not an overrun: \(error)")
            return
        }
        readEveryView(data)
        try expect(data == lenient, "the lenient decoder kept something else")
        try expect(data.bytes == Array(input.prefix(data.count)), "the encoding is not the input's prefix")
        try expect(data.count == input.count || input[data.count] == 0, "decoding stopped before a zero length")
        try expect((try? AdvertisingData(decoding: data.bytes)) == data, "the encoding does not decode the same")
    }

    private static func readEveryView(_ data: AdvertisingData) {
        _ = data.flags
        _ = data.serviceUUIDs
        _ = data.isServiceListComplete
        _ = data.solicitedServiceUUIDs
        _ = data.localName
        _ = data.completeLocalName
        _ = data.shortenedLocalName
        _ = data.txPowerLevel
        _ = data.appearance
        _ = data.fitsLegacyAdvertising
        _ = data.description
        for manufacturer in data.allManufacturerData {
            _ = ManufacturerSpecificData(bytes: manufacturer.bytes)
            _ = IBeacon(manufacturerData: manufacturer)?.description
        }
        for (uuid, bytes) in data.serviceData where uuid == EddystoneFrame.serviceUUID {
            _ = (try? EddystoneFrame(decoding: bytes))?.description
        }
        _ = data.iBeacon
        _ = data.eddystone?.name
        if let bitmask = AppleOverflowArea.bitmask(in: data) {
            _ = AppleOverflowArea.contains(.heartRate, in: bitmask)
            _ = AppleOverflowArea.listed([.heartRate, .batteryLevel], in: data)
        }
    }
}
