import BLECore
import BLEHCI
import BLETransport
import DequeModule
import Synchronization

extension Host {
    /// Resets and initialises the controller (Core Spec 5.4, Vol 3, Part C has no fixed order; this follows
    /// the usual one): Reset, local version, supported commands, BD_ADDR, event masks, LE buffer sizes (with
    /// the fallback to the shared ACL buffers the spec allows when the LE size is 0), LE features, a random
    /// static address when the controller has no public one, and the suggested data length when supported.
    /// Optional commands are sent only when the controller claims them.
    public func start(_ completion: @escaping @Sendable (Result<ControllerInfo, HostError>) -> Void) {
        let steps = StartSequence(host: self, completion: completion)
        steps.reset()
    }
}

/// The initialisation chain: each step sends one command and continues from its completion.
private struct StartSequence: Sendable {
    let host: Host
    let completion: @Sendable (Result<ControllerInfo, HostError>) -> Void

    func fail(_ error: HostError) {
        completion(.failure(HostError(error.code, "controller initialisation failed: \(error.message)")))
    }

    func reset() {
        host.send(HCIReset()) { result in
            switch result {
            case .success: quiesce()
            case .failure(let error): fail(error)
            }
        }
    }

    /// Reset should leave the controller idle, but some do not clear scanning or advertising (Bumble's Reset
    /// does nothing): disable both, ignoring refusals (a controller may refuse to disable what is off).
    func quiesce() {
        host.send(HCILESetScanEnable(enable: false)) { _ in
            host.send(HCILESetAdvertisingEnable(enable: false)) { _ in readVersion() }
        }
    }

    func readVersion() {
        host.send(HCIReadLocalVersionInformation()) { result in
            var info = ControllerInfo(address: .zero)
            if case .success(let version) = result {
                info.hciVersion = version.hciVersion.rawValue
                info.manufacturer = version.companyIdentifier
            }
            readCommands(info)
        }
    }

    func readCommands(_ info: ControllerInfo) {
        host.send(HCIReadLocalSupportedCommands()) { result in
            var info = info
            var supported: HCISupportedCommands?
            if case .success(let commands) = result {
                supported = commands.supportedCommands
                info.supportedCommands = commands.supportedCommands.octets
            }
            readAddress(info, supported)
        }
    }

    func readAddress(_ info: ControllerInfo, _ supported: HCISupportedCommands?) {
        host.send(HCIReadBDADDR()) { result in
            var info = info
            if case .success(let bd) = result { info.address = bd.address }
            setEventMasks(info, supported)
        }
    }

    func setEventMasks(_ info: ControllerInfo, _ supported: HCISupportedCommands?) {
        let mask: HCIEventMask = [
            .disconnectionComplete, .encryptionChange, .readRemoteVersionInformationComplete,
            .hardwareError, .dataBufferOverflow, .encryptionKeyRefreshComplete, .leMeta,
        ]
        host.send(HCISetEventMask(eventMask: mask)) { result in
            if case .failure(let error) = result { return fail(error) }
            let leMask: HCILEEventMask = [
                .connectionComplete, .advertisingReport, .connectionUpdateComplete,
                .readRemoteFeaturesComplete, .longTermKeyRequest,
                .remoteConnectionParameterRequest, .dataLengthChange, .phyUpdateComplete,
            ]
            host.send(HCILESetEventMask(leEventMask: leMask)) { result in
                if case .failure(let error) = result { return fail(error) }
                readBufferSize(info, supported)
            }
        }
    }

    func readBufferSize(_ info: ControllerInfo, _ supported: HCISupportedCommands?) {
        host.send(HCILEReadBufferSize()) { result in
            switch result {
            case .success(let size) where size.leACLDataPacketLength > 0 && size.totalNumLEACLDataPackets > 0:
                var info = info
                info.leBufferLength = Int(size.leACLDataPacketLength)
                info.leBufferCount = Int(size.totalNumLEACLDataPackets)
                readFeatures(info, supported)
            case .success:
                // 0 means LE shares the BR/EDR buffers (Vol 4, Part E, 7.8.2): ask Read Buffer Size.
                host.send(HCIReadBufferSize()) { result in
                    var info = info
                    if case .success(let size) = result, size.aclDataPacketLength > 0, size.totalNumACLDataPackets > 0 {
                        info.leBufferLength = Int(size.aclDataPacketLength)
                        info.leBufferCount = Int(size.totalNumACLDataPackets)
                    }
                    readFeatures(info, supported)
                }
            case .failure(let error):
                fail(error)
            }
        }
    }

    func readFeatures(_ info: ControllerInfo, _ supported: HCISupportedCommands?) {
        host.send(HCILEReadLocalSupportedFeatures()) { result in
            var info = info
            if case .success(let features) = result { info.leFeatures = features.leFeatures.rawValue }
            setAddress(info, supported)
        }
    }

    func setAddress(_ info: ControllerInfo, _ supported: HCISupportedCommands?) {
        guard info.address.bytes == [0, 0, 0, 0, 0, 0] else {
            return setDataLength(info, supported)
        }
        // No public address: use a random static one (two top bits set, Vol 6, Part B, 1.3.2.1).
        var seed = host.configuration.randomSeed
        var bytes: [UInt8] = []
        for _ in 0..<6 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            bytes.append(UInt8(truncatingIfNeeded: seed >> 33))
        }
        bytes[0] |= 0xC0
        let address = BluetoothAddress(bytes: bytes, type: .randomDevice)
        host.send(HCILESetRandomAddress(randomAddress: address)) { result in
            var info = info
            if case .success = result { info.address = address }
            setDataLength(info, supported)
        }
    }

    func setDataLength(_ info: ControllerInfo, _ supported: HCISupportedCommands?) {
        guard supported?.supports(HCILEWriteSuggestedDefaultDataLength.opcode) == true else { return finish(info) }
        let octets = UInt16(clamping: host.configuration.preferredDataLength)
        host.send(
            HCILEWriteSuggestedDefaultDataLength(suggestedMaxTxOctets: octets, suggestedMaxTxTime: Self.txTime(octets))
        ) { _ in
            finish(info)
        }
    }

    func finish(_ info: ControllerInfo) {
        host.initialised(info)
        completion(.success(info))
    }

    /// The 1M PHY time for `octets` of LL payload (Vol 6, Part B, 4.5.10): (octets + 14) * 8 us.
    static func txTime(_ octets: UInt16) -> UInt16 { (octets + 14) * 8 }
}

extension Host {
    func initialised(_ info: ControllerInfo) {
        withCore { core, _ in
            core.info = info
            core.aclLength = info.leBufferLength
            core.aclTotal = info.leBufferCount
            core.aclCredits = info.leBufferCount
        }
    }
}
