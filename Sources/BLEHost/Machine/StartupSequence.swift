import BLECore
import BLEHCI

/// Resetting and initialising the controller, one command at a time.
///
/// Core Spec 5.4, Vol 3, Part C fixes no order; this is the usual one: Reset; scanning and advertising disabled
/// (Reset should leave the controller idle, but some do not: Bumble's Reset does nothing, and a refusal to
/// disable what is off is ignored); local version; supported commands; BD_ADDR; event masks; LE buffer sizes,
/// with the fallback to the shared ACL buffers when the LE size is 0 (Vol 4, Part E, 7.8.2); LE features; a
/// random static address when the controller has no public one (with privacy, a resolvable private address
/// whatever it has); the suggested data length when supported.
/// Optional commands are sent only when the controller claims them; a failed optional read is skipped.
struct StartupSequence: Sendable {
    enum Step: Sendable, Hashable {
        case reset
        case disableScan
        case disableAdvertising
        case readVersion
        case readCommands
        case readAddress
        case setEventMask
        case setLEEventMask
        case readLEBufferSize
        case readBufferSize
        case readFeatures
        case setRandomAddress(BluetoothAddress)
        case writeDataLength
        case setDefaultPHY
    }

    /// What to do after an answer.
    enum Next: Sendable, Hashable {
        case send(HCICommandPacket)
        case finished(ControllerInfo)
        case failed(HostError)
    }

    let id: HostOperationID
    let preferredDataLength: Int
    let preferredPHY: LinkPHY?
    let randomSeed: UInt64
    let privacy: HostPrivacyConfiguration?
    private(set) var step: Step = .reset
    private var info = ControllerInfo(address: .zero)
    private var supported: HCISupportedCommands?

    init(id: HostOperationID, configuration: HostConfiguration) {
        self.id = id
        self.preferredDataLength = configuration.preferredDataLength
        self.preferredPHY = configuration.preferredPHY
        self.randomSeed = configuration.randomSeed
        self.privacy = configuration.privacy
    }

    /// The first command.
    var first: HCICommandPacket { HCIReset().packet }

    /// The controller answered the current step.
    mutating func answered(_ result: Result<HCICommandAnswer, HostError>) -> Next {
        switch step {
        case .reset:
            if case .failure(let error) = HostMachine.decode(HCIReset.self, result) { return fail(error) }
            return go(.disableScan, HCILESetScanEnable(enable: false).packet)
        case .disableScan:
            return go(.disableAdvertising, HCILESetAdvertisingEnable(enable: false).packet)
        case .disableAdvertising:
            return go(.readVersion, HCIReadLocalVersionInformation().packet)
        case .readVersion:
            if case .success(let version) = HostMachine.decode(HCIReadLocalVersionInformation.self, result) {
                info.hciVersion = version.hciVersion.rawValue
                info.manufacturer = version.companyIdentifier
            }
            return go(.readCommands, HCIReadLocalSupportedCommands().packet)
        case .readCommands:
            if case .success(let commands) = HostMachine.decode(HCIReadLocalSupportedCommands.self, result) {
                supported = commands.supportedCommands
                info.supportedCommands = commands.supportedCommands.octets
            }
            return go(.readAddress, HCIReadBDADDR().packet)
        case .readAddress:
            if case .success(let bd) = HostMachine.decode(HCIReadBDADDR.self, result) { info.address = bd.address }
            let mask: HCIEventMask = [
                .disconnectionComplete, .encryptionChange, .readRemoteVersionInformationComplete,
                .hardwareError, .dataBufferOverflow, .encryptionKeyRefreshComplete, .leMeta,
            ]
            return go(.setEventMask, HCISetEventMask(eventMask: mask).packet)
        case .setEventMask:
            if case .failure(let error) = HostMachine.decode(HCISetEventMask.self, result) { return fail(error) }
            let mask: HCILEEventMask = [
                .connectionComplete, .advertisingReport, .connectionUpdateComplete, .readRemoteFeaturesComplete,
                .longTermKeyRequest, .remoteConnectionParameterRequest, .dataLengthChange, .phyUpdateComplete,
            ]
            return go(.setLEEventMask, HCILESetEventMask(leEventMask: mask).packet)
        case .setLEEventMask:
            if case .failure(let error) = HostMachine.decode(HCILESetEventMask.self, result) { return fail(error) }
            return go(.readLEBufferSize, HCILEReadBufferSize().packet)
        case .readLEBufferSize:
            switch HostMachine.decode(HCILEReadBufferSize.self, result) {
            case .success(let size) where size.leACLDataPacketLength > 0 && size.totalNumLEACLDataPackets > 0:
                info.leBufferLength = Int(size.leACLDataPacketLength)
                info.leBufferCount = Int(size.totalNumLEACLDataPackets)
                return go(.readFeatures, HCILEReadLocalSupportedFeatures().packet)
            case .success:
                // 0 means LE shares the BR/EDR buffers (Vol 4, Part E, 7.8.2): ask Read Buffer Size.
                return go(.readBufferSize, HCIReadBufferSize().packet)
            case .failure(let error):
                return fail(error)
            }
        case .readBufferSize:
            if case .success(let size) = HostMachine.decode(HCIReadBufferSize.self, result),
                size.aclDataPacketLength > 0, size.totalNumACLDataPackets > 0
            {
                info.leBufferLength = Int(size.aclDataPacketLength)
                info.leBufferCount = Int(size.totalNumACLDataPackets)
            }
            return go(.readFeatures, HCILEReadLocalSupportedFeatures().packet)
        case .readFeatures:
            if case .success(let features) = HostMachine.decode(HCILEReadLocalSupportedFeatures.self, result) {
                info.leFeatures = features.leFeatures.rawValue
            }
            return afterFeatures()
        case .setRandomAddress(let address):
            if case .success = HostMachine.decode(HCILESetRandomAddress.self, result) { info.address = address }
            return afterAddress()
        case .writeDataLength:
            return afterDataLength()
        case .setDefaultPHY:
            return .finished(info)
        }
    }

    private mutating func go(_ next: Step, _ packet: HCICommandPacket) -> Next {
        step = next
        return .send(packet)
    }

    private func fail(_ error: HostError) -> Next {
        if error.hciStatus == .controllerBusy {
            // What a controller shared over a network answers a second host (`ble controller`, others).
            return .failed(
                HostError(
                    error.code, "the controller is busy (another host is using it): \(error.message)"))
        }
        return .failed(HostError(error.code, "controller initialisation failed: \(error.message)"))
    }

    private mutating func afterFeatures() -> Next {
        let hasPublicAddress = info.address.bytes != [0, 0, 0, 0, 0, 0]
        guard let privacy else {
            guard !hasPublicAddress else { return afterAddress() }
            // No public address: use a random static one.
            let address = staticAddress
            return go(.setRandomAddress(address), HCILESetRandomAddress(randomAddress: address).packet)
        }
        // Privacy: the identity stays behind a resolvable private address from the start.
        info.identityAddress = privacy.identityAddress ?? (hasPublicAddress ? info.address : staticAddress)
        let address = HostMachine.privateAddress(resolvingKey: privacy.resolvingKey, seed: randomSeed, count: 0)
        return go(.setRandomAddress(address), HCILESetRandomAddress(randomAddress: address).packet)
    }

    /// The random static address this host takes when the controller has no public one (two top bits set, Vol 6,
    /// Part B, 1.3.2.1), from the host's seed.
    private var staticAddress: BluetoothAddress {
        var generator = LinearCongruential(seed: randomSeed)
        var bytes = (0..<6).map { _ in UInt8(truncatingIfNeeded: generator.nextHighBits()) }
        bytes[0] |= 0xC0
        return BluetoothAddress(bytes: bytes, type: .randomDevice)
    }

    private mutating func afterAddress() -> Next {
        guard supported?.supports(HCILEWriteSuggestedDefaultDataLength.opcode) == true else { return afterDataLength() }
        let octets = UInt16(clamping: preferredDataLength)
        let command = HCILEWriteSuggestedDefaultDataLength(
            suggestedMaxTxOctets: octets, suggestedMaxTxTime: Self.txTime(octets, on: preferredPHY))
        return go(.writeDataLength, command.packet)
    }

    /// The preferred PHY as the controller's default, so that a peer's PHY request meets it.
    private mutating func afterDataLength() -> Next {
        guard let phy = preferredPHY, supported?.supports(HCILESetDefaultPHY.opcode) == true else {
            return .finished(info)
        }
        return go(.setDefaultPHY, HCILESetDefaultPHY(txPHYs: phy.preferences, rxPHYs: phy.preferences).packet)
    }

    /// The time `octets` of LL payload take on the air (Vol 6, Part B, 4.5.10), as a host asks for it: on LE 1M
    /// `(octets + 14) · 8` µs, and when the host prefers LE Coded, what they take there (S=8:
    /// `(octets + 9) · 64 + 400` µs, 17,040 for 251), or the controller would cut its PDUs to fit the 1M time.
    static func txTime(_ octets: UInt16, on phy: LinkPHY?) -> UInt16 {
        if phy == .leCoded { return UInt16(clamping: (Int(octets) + 9) * 64 + 400) }
        return UInt16(clamping: (Int(octets) + 14) * 8)
    }
}

extension HostMachine {
    mutating func startInitialisation(id: HostOperationID) {
        guard startup == nil else {
            complete(id, .failure(HostError(.invalidState, "the controller is already being initialised")))
            return
        }
        let sequence = StartupSequence(id: id, configuration: configuration)
        startup = sequence
        // HCI_Reset first: an answer to a command that timed out before it does not come after it, and keeping
        // those opcodes would throw away the answers of the sequence's own commands (a Reset that went unanswered
        // once, a probe's Read Local Version Information).
        commands.abandoned = [:]
        enqueue(sequence.first, for: .startup)
    }

    mutating func startupAnswered(_ result: Result<HCICommandAnswer, HostError>) {
        guard var sequence = startup else { return }
        let next = sequence.answered(result)
        startup = sequence
        switch next {
        case .send(let packet):
            enqueue(packet, for: .startup)
        case .finished(let info):
            startup = nil
            // Whoever started it, the controller answers now: no restart is left to try (the host's own restart
            // counts its failures until it hears this, `restartCompleted`).
            if let timer = restart.timer { cancelTimer(timer) }
            restart.timer = nil
            if sequence.id != Self.restartOperation { restart.failures = 0 }
            self.info = info
            acl.length = info.leBufferLength
            acl.total = info.leBufferCount
            acl.credits = info.leBufferCount
            startAddressPrivacy()
            complete(sequence.id, .success(.controller(info)))
        case .failed(let error):
            startup = nil
            complete(sequence.id, .failure(error))
        }
    }
}
