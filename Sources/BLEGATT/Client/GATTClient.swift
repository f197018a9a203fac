import BLEATT
import BLECore
import DequeModule

/// Names one operation started on a ``GATTClient``; the caller picks it.
public struct GATTOperationID: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "op#\(rawValue)" }
}

/// The GATT procedures a client runs, by name.
public enum GATTOperation: Sendable, Hashable {
    case exchangeMTU(clientRxMTU: UInt16)
    case discoverAllPrimaryServices
    case discoverPrimaryServices(uuid: BluetoothUUID)
    case findIncludedServices(GATTService)
    /// All characteristics of the service, or only those of one type.
    case discoverCharacteristics(GATTService, uuid: BluetoothUUID?)
    case discoverDescriptors(GATTCharacteristic)
    /// Read a characteristic value or descriptor (long reads included).
    case read(AttributeHandle)
    /// Read the values of a characteristic type in a handle range (Read Using Characteristic UUID).
    case readUsingCharacteristicUUID(BluetoothUUID, range: ClosedRange<AttributeHandle>)
    /// Write a characteristic value or descriptor with a response (long writes included).
    case write(AttributeHandle, value: [UInt8])
    /// Write a Client Characteristic Configuration descriptor.
    case setClientConfiguration(descriptor: AttributeHandle, GATTClientConfiguration)

    /// The stepper that carries this operation out.
    public var procedure: any GATTProcedure {
        switch self {
        case .exchangeMTU(let mtu): return GATTExchangeMTU(clientRxMTU: mtu)
        case .discoverAllPrimaryServices: return GATTDiscoverAllPrimaryServices()
        case .discoverPrimaryServices(let uuid): return GATTDiscoverPrimaryServicesByUUID(uuid: uuid)
        case .findIncludedServices(let service): return GATTFindIncludedServices(service: service)
        case .discoverCharacteristics(let service, let uuid):
            return GATTDiscoverCharacteristics(service: service, uuid: uuid)
        case .discoverDescriptors(let characteristic): return GATTDiscoverDescriptors(characteristic: characteristic)
        case .read(let handle): return GATTReadValue(handle: handle)
        case .readUsingCharacteristicUUID(let uuid, let range):
            return GATTReadUsingCharacteristicUUID(uuid: uuid, range: range)
        case .write(let handle, let value): return GATTWriteValue(handle: handle, value: value)
        case .setClientConfiguration(let handle, let configuration):
            return GATTWriteValue(handle: handle, value: configuration.bytes)
        }
    }
}

/// The GATT client of one connection: runs procedures one at a time over that connection's ATT bearer.
///
/// ### Overview
/// A pure state machine. The driver starts operations (`start(_:id:)`), passes each
/// ``Action/sendRequest(_:_:)`` to `ATTBearer.sendRequest(_:id:)`, routes the bearer's `.complete(id, result)`
/// back into ``requestCompleted(_:_:)`` and its `.mtuChanged` into ``mtuChanged(_:)``, and reports each
/// ``Action/complete(_:_:)``. Operations wait in a FIFO queue while another runs. Write Without Response is
/// no procedure: ``writeWithoutResponse(_:value:)`` returns the command to send at once.
///
/// A failed request ends its procedure only: the next operation starts, unless the failure closed the
/// bearer or the link, in which case it fails too (the bearer fails it at once).
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4 (GATT feature requirements).
public struct GATTClient: Sendable {
    public enum Action: Sendable, Hashable {
        /// Hand this request to the bearer (`ATTBearer.sendRequest(pdu, id:)`).
        case sendRequest(ATTPDU, ATTRequestID)
        /// An operation finished.
        case complete(GATTOperationID, Result<GATTResult, GATTError>)
    }

    private struct Running: Sendable {
        var id: GATTOperationID
        var procedure: any GATTProcedure
        var request: ATTRequestID
    }

    /// The ATT_MTU in force (the driver reports changes).
    public private(set) var mtu: UInt16 = ATTBearer.defaultMTU
    private var running: Running?
    private var queue: Deque<(GATTOperationID, any GATTProcedure)> = []
    private var nextRequestID: UInt64
    private var isDisconnected = false

    /// `firstRequestID` lets the driver keep the client's ATT request ids apart from its own.
    public init(firstRequestID: UInt64 = 1) {
        self.nextRequestID = firstRequestID
    }

    /// Whether an operation is running or queued.
    public var isBusy: Bool { running != nil || !queue.isEmpty }

    /// Starts an operation, or queues it behind the running one.
    public mutating func start(_ operation: GATTOperation, id: GATTOperationID) -> [Action] {
        start(operation.procedure, id: id)
    }

    /// Starts any procedure stepper, or queues it.
    public mutating func start(_ procedure: any GATTProcedure, id: GATTOperationID) -> [Action] {
        guard !isDisconnected else { return [.complete(id, .failure(GATTError(.disconnected)))] }
        queue.append((id, procedure))
        return runNext()
    }

    /// The bearer finished a request this client sent. Completions of other ids are ignored.
    public mutating func requestCompleted(_ request: ATTRequestID, _ result: Result<ATTPDU, ATTRequestFailure>)
        -> [Action]
    {
        guard var current = running, current.request == request else { return [] }
        let step = current.procedure.received(result, mtu: mtu)
        running = current
        return handle(step) + runNext()
    }

    /// The bearer's ATT_MTU changed.
    /// An ATT_MTU below 23 is taken as 23, the least ATT allows (the requests' lengths count on it).
    public mutating func mtuChanged(_ mtu: UInt16) {
        self.mtu = max(23, mtu)
    }

    /// The link is gone: the running and queued operations fail with ``GATTError/Code/disconnected``.
    public mutating func linkDisconnected() -> [Action] {
        isDisconnected = true
        var actions: [Action] = []
        if let running { actions.append(.complete(running.id, .failure(GATTError(.disconnected)))) }
        running = nil
        while let (id, _) = queue.popFirst() { actions.append(.complete(id, .failure(GATTError(.disconnected)))) }
        return actions
    }

    /// The Write Command for a Write Without Response, or an error when the value exceeds ATT_MTU-3.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.9.1 (Write Without Response).
    public func writeWithoutResponse(_ handle: AttributeHandle, value: [UInt8]) throws(GATTError) -> ATTPDU {
        guard value.count <= Int(mtu) - 3 else {
            throw GATTError(.rejected, handle: handle, "\(value.count) octets do not fit ATT_MTU-3 (\(Int(mtu) - 3))")
        }
        return .writeCommand(.init(handle: handle, value: value))
    }

    // MARK: - Private

    private mutating func runNext() -> [Action] {
        var actions: [Action] = []
        while running == nil, let (id, procedure) = queue.popFirst() {
            var procedure = procedure
            let step = procedure.start(mtu: mtu)
            running = Running(id: id, procedure: procedure, request: ATTRequestID(0))
            actions += handle(step)
        }
        return actions
    }

    private mutating func handle(_ step: GATTProcedureStep) -> [Action] {
        guard let current = running else { return [] }
        switch step {
        case .send(let pdu):
            let request = ATTRequestID(nextRequestID)
            nextRequestID += 1
            running?.request = request
            return [.sendRequest(pdu, request)]
        case .finished(let result):
            running = nil
            return [.complete(current.id, result)]
        }
    }
}
