import BLECore
import BLEHost

/// What an app advertises, field by field (a `PeripheralManager`'s advertisement data). The system builds from it
/// the two forms it puts on the air: as asked (`request`), and, for an app out of the foreground with
/// `bluetooth-peripheral`, the background form (`backgroundRequest`).
package struct AdvertisingContent: Sendable, Hashable {
    package var localName: String?
    package var serviceUUIDs: [BluetoothUUID]
    package var solicitedServiceUUIDs: [BluetoothUUID]
    package var txPowerLevel: Int?
    package var manufacturerData: [UInt8]?
    package var serviceData: [BluetoothUUID: [UInt8]]
    /// False: not connectable (the kind then depends on whether there is a scan response); nil or true:
    /// connectable, as CoreBluetooth always advertises.
    package var isConnectable: Bool?

    package init(
        localName: String? = nil, serviceUUIDs: [BluetoothUUID] = [], solicitedServiceUUIDs: [BluetoothUUID] = [],
        txPowerLevel: Int? = nil, manufacturerData: [UInt8]? = nil, serviceData: [BluetoothUUID: [UInt8]] = [:],
        isConnectable: Bool? = nil
    ) {
        self.localName = localName
        self.serviceUUIDs = serviceUUIDs
        self.solicitedServiceUUIDs = solicitedServiceUUIDs
        self.txPowerLevel = txPowerLevel
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.isConnectable = isConnectable
    }

    /// The form the app asked for.
    package var request: AdvertisingRequest {
        let (data, scanResponse) = encoded()
        return AdvertisingRequest(
            parameters: parameters(scanResponse: scanResponse), data: data, scanResponse: scanResponse)
    }

    /// The form of an app out of the foreground with `bluetooth-peripheral` (IOSRules.md 2.3–2.5, 2.7): no local
    /// name, the service UUIDs in Apple's overflow area (`AppleOverflowArea`, in place of any manufacturer data),
    /// every `interval`.
    package func backgroundRequest(interval: Duration) -> AdvertisingRequest {
        var background = self
        background.localName = nil
        if !serviceUUIDs.isEmpty {
            background.serviceUUIDs = []
            background.manufacturerData = AppleOverflowArea.manufacturerData(for: serviceUUIDs).bytes
        }
        let (data, scanResponse) = background.encoded()
        var parameters = background.parameters(scanResponse: scanResponse)
        // In units of 0.625 ms, within what LE Set Advertising Parameters takes (20 ms ... 10.24 s).
        let units = interval.units(of: .microseconds(625), within: 0x0020...0x4000)
        parameters.intervalMin = units
        parameters.intervalMax = units
        return AdvertisingRequest(parameters: parameters, data: data, scanResponse: scanResponse)
    }

    /// Connectable advertising (ADV_IND) unless `isConnectable` is false: then scannable (ADV_SCAN_IND) when
    /// there is a scan response, non-connectable (ADV_NONCONN_IND) otherwise. CoreBluetooth always advertises
    /// connectably; beacons and tools need the other kinds.
    package func parameters(scanResponse: [UInt8]) -> AdvertisingParameters {
        guard isConnectable == false else { return AdvertisingParameters() }
        return AdvertisingParameters(kind: scanResponse.isEmpty ? .nonConnectable : .scannable)
    }

    /// The advertising PDU payload and scan response: flags, service UUIDs and the name first (shortened if need
    /// be), then the other fields where they fit; the complete name, services that did not fit, and fields that
    /// did not fit go into the scan response.
    package func encoded() -> (advertising: [UInt8], scanResponse: [UInt8]) {
        let services = serviceUUIDs
        var adv = AdvertisingData.packed(localName: localName, serviceUUIDs: services)
        var scan = AdvertisingData()
        let limit = AdvertisingData.legacyMaximumLength

        func place(_ structure: ADStructure) {
            if adv.count + structure.encodedLength <= limit {
                adv.append(structure)
            } else if scan.count + structure.encodedLength <= limit {
                scan.append(structure)
            }
        }

        // Each field is checked against what a legacy PDU holds before it becomes an AD structure, which holds at
        // most 254 octets: a longer field could not be placed anyway.
        if let name = localName, adv.completeLocalName != name, name.utf8.count <= limit - 2 {
            var named = AdvertisingData()
            named.addLocalName(name, complete: true)
            if let s = named.structures.first, s.encodedLength <= limit - scan.count { scan.append(s) }
        }
        let advertised = Set(adv.serviceUUIDs)
        let missing = services.filter { !advertised.contains($0) }
        if !missing.isEmpty {
            let overflow = AdvertisingData.packed(
                localName: nil, serviceUUIDs: missing, flags: nil, maximumLength: limit - scan.count)
            for s in overflow.structures { scan.append(s) }
        }
        if let tx = txPowerLevel {
            var d = AdvertisingData()
            d.addTxPowerLevel(Int8(clamping: tx))
            d.structures.forEach(place)
        }
        if let m = manufacturerData, m.count >= 2, m.count <= limit - 2 {
            place(ADStructure(type: .manufacturerSpecificData, data: m))
        }
        for (uuid, value) in serviceData.sorted(by: { $0.key < $1.key }) where value.count <= limit - 4 {
            var d = AdvertisingData()
            d.addServiceData(value, for: uuid)
            d.structures.forEach(place)
        }
        if !solicitedServiceUUIDs.isEmpty {
            var d = AdvertisingData()
            d.addSolicitedServiceUUIDs(Array(solicitedServiceUUIDs.prefix(limit / 2)))
            d.structures.forEach(place)
        }
        return (adv.bytes, scan.bytes)
    }
}
