import BLECore
import Foundation

extension AdvertisementData {
    /// The meaning of an advertisement and its scan response.
    ///
    /// Malformed data (a structure overrunning the payload) contributes the structures before the fault; a
    /// scanner shows what it can rather than dropping the device.
    init(decodingAdvertisement adv: [UInt8], scanResponse: [UInt8]?, connectable: Bool) {
        self.init(
            decoded: AdvertisingData(
                AdvertisingData(leniently: adv).structures + AdvertisingData(leniently: scanResponse ?? []).structures),
            connectable: connectable)
    }

    /// The advertisement `data` (an advertisement and its scan response, decoded) carries.
    init(decoded data: AdvertisingData, connectable: Bool) {
        self.init()
        localName = data.localName
        let services = data.serviceUUIDs
        serviceUUIDs = services.isEmpty ? nil : services
        if let m = data.manufacturerData { manufacturerData = Data(m.bytes) }
        let sd = data.serviceData
        serviceData = sd.isEmpty ? nil : sd.mapValues { Data($0) }
        txPowerLevel = data.txPowerLevel.map { Int($0) }
        let solicited = data.solicitedServiceUUIDs
        solicitedServiceUUIDs = solicited.isEmpty ? nil : solicited
        isConnectable = connectable
    }

    /// The advertising PDU payload and scan response for this data: flags, service UUIDs and the name first
    /// (shortened if need be), then the other fields where they fit; the complete name, services that did
    /// not fit, and fields that did not fit go into the scan response.
    func encodedForAdvertising() -> (advertising: [UInt8], scanResponse: [UInt8]) {
        let services = serviceUUIDs ?? []
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
            place(ADStructure(type: .manufacturerSpecificData, data: Array(m)))
        }
        for (uuid, value) in (serviceData ?? [:]).sorted(by: { $0.key < $1.key }) where value.count <= limit - 4 {
            var d = AdvertisingData()
            d.addServiceData(Array(value), for: uuid)
            d.structures.forEach(place)
        }
        if let solicited = solicitedServiceUUIDs, !solicited.isEmpty {
            var d = AdvertisingData()
            d.addSolicitedServiceUUIDs(Array(solicited.prefix(limit / 2)))
            d.structures.forEach(place)
        }
        return (adv.bytes, scan.bytes)
    }
}
