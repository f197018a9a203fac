import BLE
import BLEHCI
import BLEProfiles
import BLETransport
import Foundation

extension FuzzTarget {
    /// A btsnoop capture from a file (`ble btsnoop FILE`): read record by record until its end or the first
    /// error. The walk stops at that error and stays stopped; records are numbered in order; a whole H4 record
    /// whose packet decoded is, written again by `BTSnoopWriter`, the same bytes (timestamp included); and
    /// `records()` gives the walk's records or its error.
    static let btsnoopReader = FuzzTarget("btsnoop-reader", "a btsnoop capture into BTSnoopReader") {
        input throws(Violation) in
        let reader: BTSnoopReader
        do {
            reader = try BTSnoopReader(bytes: input)
        } catch {
            return
        }
        var iterator = reader.makeIterator()
        var records: [BTSnoopReader.Record] = []
        var offset = 16
        var failure: BTSnoopReader.Error?
        while true {
            let record: BTSnoopReader.Record?
            do throws(BTSnoopReader.Error) {
                record = try iterator.nextRecord()
            } catch {
                failure = error
                break
            }
            guard let record else { break }
            try expect(record.index == records.count, "record \(records.count) came numbered \(record.index)")
            try expect(input.count >= offset + 24, "record \(record.index) was read past the end")
            let included = input[(offset + 4)..<(offset + 8)].reduce(0) { $0 << 8 | Int($1) }
            let whole = Array(input[offset..<(offset + 24 + included)])
            if reader.datalink == .h4, case .packet(let packet) = record.content, record.drops == 0,
                whole[8..<12] == [
                    0, 0, 0, UInt8(BTSnoopWriter.flags(for: packet.packetType, direction: record.direction)),
                ]
            {
                let again = BTSnoopWriter.record(
                    packet, direction: record.direction, unixMicroseconds: record.unixMicroseconds)
                try expect(again == whole, "record \(record.index) (\(packet)) does not write back to its bytes")
            }
            records.append(record)
            offset += 24 + included
        }
        try expect(iterator.failure == failure, "the walk's failure is not the error it threw")
        try expect(iterator.next() == nil, "the walk went on after it ended")
        var all: [BTSnoopReader.Record] = []
        var allFailed: BTSnoopReader.Error?
        do throws(BTSnoopReader.Error) {
            all = try reader.records()
        } catch {
            allFailed = error
        }
        try expect(
            allFailed == failure,
            "records() failed with \(String(describing: allFailed)), the walk with \(String(describing: failure))")
        if failure == nil {
            try expect(offset == input.count, "the walk ended at byte \(offset) of \(input.count)")
            try expect(all == records, "records() differs from the walk")
        }
    }

    /// A JSON profile file (`ble serve FILE`): a profile, or a refusal whose message starts with the file's name.
    /// A profile it accepts lists a service at least, each once, includes only services listed before them,
    /// advertises each UUID at most once, and gives a fixed value only to read-only characteristics.
    static let jsonProfile = FuzzTarget("json-profile", "a JSON profile file into ProfileFile (ble serve FILE)") {
        input throws(Violation) in
        let file: ProfileFile
        do throws(ProfileFileError) {
            file = try ProfileFile(json: Data(input), source: "fuzz.json")
        } catch {
            try expect(error.message.hasPrefix("fuzz.json: "), "a refusal that does not name the file: \(error)")
            return
        }
        try expect(!file.services.isEmpty, "a profile with no service")
        var seen: Set<BluetoothUUID> = []
        for service in file.services {
            try expect(service.includes.allSatisfy(seen.contains), "\(service.uuid) includes a later service")
            try expect(seen.insert(service.uuid).inserted, "\(service.uuid) is listed twice")
            for characteristic in service.characteristics where characteristic.value != nil {
                try expect(
                    characteristic.properties.subtracting([.read, .broadcast, .extendedProperties]).isEmpty,
                    "\(characteristic.uuid) has a fixed value and properties \(characteristic.properties)")
            }
        }
        if let advertised = file.advertisedServices {
            try expect(Set(advertised).count == advertised.count, "an advertised UUID twice")
        }
    }
}
