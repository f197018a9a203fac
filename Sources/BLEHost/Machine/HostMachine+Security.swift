import BLECore
import BLEGATT
import BLEHCI
import BLEL2CAP
import BLESMP
import NIOCore

/// What the host knows of one link's security: the pairing under way, its timer, the requests waiting for
/// it, and whether the link is encrypted.
struct LinkSecurity: Sendable {
    var pairing: SMPPairing?
    var timer: HostTimerID?
    /// The `pair` request waiting for the pairing's end.
    var pairRequest: HostOperationID?
    /// The `encrypt` request waiting for Encryption Change.
    var encryptRequest: HostOperationID?
    /// The key the peripheral answers the next LTK request with (EDIV and Rand zero): the pairing's STK or LTK.
    var keyForRequest: [UInt8]?
    /// The peripheral's Security Request has not been answered by a pairing yet (central).
    var peerAskedSecurity = false
    var encrypted = false
}

extension HostMachine {
    // MARK: Requests

    /// Central: pairs (Pairing Request); peripheral: asks the central to (Security Request). Completes with
    /// `.paired(result)` when the keys are distributed, or fails with the pairing's failure.
    mutating func pair(_ handle: ConnectionHandle, id: HostOperationID) {
        guard let security = configuration.security else {
            return complete(id, .failure(HostError(.unsupported, "this host is not configured to pair")))
        }
        guard let link = links[handle] else {
            return complete(id, .failure(HostError(.invalidState, "pairing: \(handle) is not a link")))
        }
        if link.security.pairRequest != nil || link.security.pairing?.isPairing == true {
            return complete(id, .failure(HostError(.invalidState, "a pairing is already under way on \(handle)")))
        }
        if links[handle]?.security.pairing == nil {
            let pairing = makePairing(for: link.info, security)
            links[handle]?.security.pairing = pairing
        }
        if let wait = repeatedAttemptsWait(on: handle) {
            // The wait is this side's to keep (Vol 3 Part H 2.3.6): nothing starts, and a peripheral whose Security
            // Request is why this central would pair hears Repeated Attempts.
            let asked = link.info.role == .central && links[handle]?.security.peerAskedSecurity == true
            links[handle]?.security.peerAskedSecurity = false
            return refuseForRepeatedAttempts(on: handle, wait: wait, request: id, tellPeer: asked)
        }
        links[handle]?.security.peerAskedSecurity = false
        links[handle]?.security.pairRequest = id
        if link.info.role == .central { emit(.pairingStarted(handle, byPeer: false)) }
        runPairing(links[handle]?.security.pairing?.handle(.start) ?? [], on: handle)
        // A peripheral's Security Request is answered by the central's Pairing Request, or not at all: the
        // request stays until the pairing ends, the link does, or the timer runs out.
        if link.info.role == .peripheral, links[handle]?.security.timer == nil {
            startSecurityTimer(on: handle)
        }
    }

    /// Encrypts the link with a key kept from an earlier pairing (central only). Completes when the controller
    /// reports Encryption Change (or Key Refresh Complete on a link already encrypted).
    mutating func encrypt(_ handle: ConnectionHandle, key: SMPPairing.LongTermKey, id: HostOperationID) {
        guard let link = links[handle] else {
            return complete(id, .failure(HostError(.invalidState, "encrypting: \(handle) is not a link")))
        }
        guard link.info.role == .central else {
            return complete(id, .failure(HostError(.invalidState, "only the central starts encryption")))
        }
        guard link.security.encryptRequest == nil else {
            return complete(id, .failure(HostError(.invalidState, "encryption is already being started on \(handle)")))
        }
        guard key.key.count == 16 else {
            return complete(id, .failure(HostError(.invalidParameters, "a Long Term Key has 16 octets")))
        }
        links[handle]?.security.encryptRequest = id
        startEncryption(handle, key)
    }

    /// The user's answer to a pairing prompt.
    mutating func answerPairing(_ handle: ConnectionHandle, _ answer: PairingAnswer, id: HostOperationID) {
        guard links[handle]?.security.pairing?.isPairing == true else {
            return complete(id, .failure(HostError(.invalidState, "no pairing waits for an answer on \(handle)")))
        }
        let event: SMPPairing.Event
        switch answer {
        case .accept(let accepted): event = .confirmed(accepted)
        case .passkey(let value): event = .passkeyEntered(value)
        }
        complete(id, .success(.done))
        runPairing(links[handle]?.security.pairing?.handle(event) ?? [], on: handle)
    }

    /// Answers the controller's LTK request with a key kept from an earlier pairing, or says there is none.
    mutating func replyLongTermKey(_ handle: ConnectionHandle, key: [UInt8]?, id: HostOperationID) {
        guard links.contains(handle) else {
            return complete(id, .failure(HostError(.invalidState, "answering an LTK request: \(handle) is not a link")))
        }
        if let key, key.count == 16 {
            enqueue(HCILELongTermKeyRequestReply(handle: handle, longTermKey: key).packet, for: .operation(id))
        } else {
            enqueue(HCILELongTermKeyRequestNegativeReply(handle: handle).packet, for: .operation(id))
        }
    }

    // MARK: Events

    /// A frame on the Security Manager channel (CID 0x0006).
    mutating func receivedSMP(_ payload: ByteBuffer, on handle: ConnectionHandle) {
        let bytes = Array(payload.readableBytesView)
        guard let security = configuration.security, let link = links[handle] else {
            // Not configured to pair: refuse politely (Pairing Not Supported) so the peer does not wait for its
            // timeout. Never answer a Pairing Failed.
            if let code = bytes.first, code != 0x05 {
                sendPairingFailed(.pairingNotSupported, on: handle)
            }
            return
        }
        let pdu: SMPPDU
        do {
            pdu = try SMPPDU(decoding: bytes)
        } catch {
            log(.warning, "a malformed SMP command from the peer: \(error)", connection: handle)
            // A pairing under way fails with Invalid Parameters (Vol 3 Part H 3.3), in the machine's order. A
            // malformed Pairing or Security Request, which would start one, is refused the same way. Anything
            // else outside a pairing (a malformed Pairing Failed among them) is not answered: Pairing Failed
            // aborts a pairing in progress (3.5.5).
            if links[handle]?.security.pairing?.isPairing == true {
                runPairing(links[handle]?.security.pairing?.handle(.malformed) ?? [], on: handle)
            } else if bytes.first == 0x01 || bytes.first == 0x0B {
                sendPairingFailed(.invalidParameters, on: handle)
            }
            return
        }
        if refusedAsRepeatedAttempt(pdu, on: handle) { return }
        if links[handle]?.security.pairing == nil {
            let pairing = makePairing(for: link.info, security)
            links[handle]?.security.pairing = pairing
        }
        if case .pairingRequest = pdu, links[handle]?.security.pairing?.isPairing != true {
            emit(.pairingStarted(handle, byPeer: true))
        }
        runPairing(links[handle]?.security.pairing?.handle(.received(pdu)) ?? [], on: handle)
    }

    /// Encryption Change and Encryption Key Refresh Complete.
    mutating func encryptionChanged(_ handle: ConnectionHandle, status: HCIStatus, encrypted: Bool) {
        guard links.contains(handle) else { return }
        let wasEncrypted = links[handle]?.security.encrypted ?? false
        links[handle]?.security.encrypted = status == .success ? encrypted : wasEncrypted
        server.encryptionChanged(handle, isEncrypted: links[handle]?.security.encrypted ?? false)
        if let id = links[handle]?.security.encryptRequest {
            links[handle]?.security.encryptRequest = nil
            complete(
                id,
                status == .success
                    ? .success(.done)
                    : .failure(HostError(.hci(status), "encrypting the link failed: \(status)")))
        }
        emit(.encryptionChanged(handle, encrypted: links[handle]?.security.encrypted ?? false, status: status))
        if links[handle]?.security.pairing != nil {
            runPairing(
                links[handle]?.security.pairing?.handle(.encryptionChanged(status: status.rawValue)) ?? [], on: handle)
        }
    }

    /// The controller asks the peripheral's host for the key the central encrypts with.
    mutating func longTermKeyRequested(_ handle: ConnectionHandle, ediv: UInt16, rand: UInt64) {
        guard links.contains(handle) else {
            return enqueue(HCILELongTermKeyRequestNegativeReply(handle: handle).packet, for: .none)
        }
        // A key the pairing under way made (EDIV and Rand zero) answers at once.
        if ediv == 0, rand == 0, let key = links[handle]?.security.keyForRequest {
            links[handle]?.security.keyForRequest = nil
            return enqueue(HCILELongTermKeyRequestReply(handle: handle, longTermKey: key).packet, for: .none)
        }
        guard configuration.security != nil else {
            return enqueue(HCILELongTermKeyRequestNegativeReply(handle: handle).packet, for: .none)
        }
        // A bond's key is the layer above's to find: it answers with `replyLongTermKey`.
        emit(.longTermKeyRequested(handle, ediv: ediv, rand: rand))
    }

    /// The 30 s Security Manager timer expired.
    mutating func securityTimerFired(_ id: HostTimerID, on handle: ConnectionHandle) {
        guard links[handle]?.security.timer == id else { return }
        links[handle]?.security.timer = nil
        guard links[handle]?.security.pairing?.isPairing == true else {
            // A Security Request nobody answered.
            if let request = links[handle]?.security.pairRequest {
                links[handle]?.security.pairRequest = nil
                complete(request, .failure(HostError(.transactionTimeout, "the central did not pair within 30 s")))
            }
            return
        }
        runPairing(links[handle]?.security.pairing?.handle(.timerExpired) ?? [], on: handle)
    }

    /// What is left of a link's security when it goes down: its requests fail, its timer stops.
    mutating func securityLinkDown(_ link: Link, failure: HostError) {
        if let timer = link.security.timer { cancelTimer(timer) }
        if let id = link.security.pairRequest { complete(id, .failure(failure)) }
        if let id = link.security.encryptRequest { complete(id, .failure(failure)) }
    }

    // MARK: The pairing machine's actions

    /// A pairing machine for the link, with random values of its own: the seed is stretched by a count of the
    /// pairings this host made, so no two (not even two on a reused handle) share nonces, passkeys or keys.
    private mutating func makePairing(for info: LinkInfo, _ security: HostSecurityConfiguration) -> SMPPairing {
        pairingsMade += 1
        // The addresses the link was made with, not this host's current one nor the peer's identity.
        let link = links[info.handle]
        let local = link?.localAddress ?? self.info?.address ?? .zero
        let localAddress = BluetoothAddress(
            bytes: local.bytes, type: local.type.isRandom ? .randomDevice : .publicDevice)
        let onAir = link?.peerAddress ?? info.peer
        let peer = BluetoothAddress(
            bytes: onAir.bytes, type: onAir.type.isRandom ? .randomDevice : .publicDevice)
        var random = SMPRandom(seed: security.seed + Self.littleEndian(pairingsMade))
        var privateKey = random.next(32)
        // A draw outside 1...n-1 (about one in 2^32) is drawn again.
        while SMPKeyPair(privateKey: privateKey) == nil { privateKey = random.next(32) }
        var configuration = SMPPairing.Configuration(
            ioCapability: security.ioCapability, privateKey: privateKey, identity: distributedIdentity)
        configuration.bonding = security.bonding
        configuration.mitm = security.mitm
        configuration.secureConnections = security.secureConnections
        configuration.secureConnectionsOnly = security.secureConnectionsOnly
        configuration.distributedKeys = security.distributedKeys
        configuration.requestedKeys = security.requestedKeys
        return SMPPairing(
            role: info.role == .central ? .initiator : .responder, configuration: configuration,
            initiatorAddress: info.role == .central ? localAddress : peer,
            responderAddress: info.role == .central ? peer : localAddress, random: random)
    }

    private mutating func runPairing(_ actions: [SMPPairing.Action], on handle: ConnectionHandle) {
        // A pairing that ends with this side's keys sent (the initiator's distribution comes last) is over only
        // once the controller has delivered them: an application that disconnects at once must not cut the
        // peer's keys off (seen with `ble pair`, which left the lock without a bond).
        var delivery: HostOperationID?
        if actions.contains(where: { if case .completed = $0 { true } else { false } }),
            actions.contains(where: { if case .send = $0 { true } else { false } })
        {
            let id = HostOperationID(rawValue: nextPairingDelivery)
            nextPairingDelivery += 1
            beginDelivery(id)
            delivery = id
        }
        for action in actions {
            switch action {
            case .send(let pdu):
                queueL2CAP(ByteBuffer(bytes: pdu.encoded), channel: .smp, kind: .other, on: handle, delivery: delivery)
            case .startTimer:
                startSecurityTimer(on: handle)
            case .stopTimer:
                if let timer = links[handle]?.security.timer { cancelTimer(timer) }
                links[handle]?.security.timer = nil
            case .displayPasskey(let value):
                emit(.pairingPrompt(handle, .displayPasskey(value)))
            case .requestPasskey:
                emit(.pairingPrompt(handle, .enterPasskey))
            case .confirm(let value):
                emit(.pairingPrompt(handle, .confirm(numericValue: value)))
            case .encrypt(let key):
                startEncryption(handle, key)
            case .provideKeyForEncryption(let key):
                links[handle]?.security.keyForRequest = key
            case .securityRequested(let requirements):
                links[handle]?.security.peerAskedSecurity = true
                emit(.securityRequested(handle, requirements))
            case .ignored(let pdu):
                log(.info, "an SMP command outside any pairing, not answered: \(pdu)", connection: handle)
            case .completed(let result):
                let request = links[handle]?.security.pairRequest
                links[handle]?.security.pairRequest = nil
                if let delivery {
                    pairingsDelivering[delivery] = (handle, result, request)
                } else {
                    pairingCompleted(on: handle, result, request: request)
                }
            case .failed(let failure):
                links[handle]?.security.keyForRequest = nil
                pairingAttemptFailed(on: handle, failure)
                if let id = links[handle]?.security.pairRequest {
                    links[handle]?.security.pairRequest = nil
                    complete(id, .failure(HostError(.pairingFailed, "\(failure)")))
                }
                emit(.pairingFailed(handle, failure))
            }
        }
        if let delivery { endDelivery(delivery) }
        pumpACL()
    }

    /// Pairing Failed with `reason`, sent outside the pairing machine (which sends its own).
    mutating func sendPairingFailed(_ reason: SMPFailureReason, on handle: ConnectionHandle) {
        queueL2CAP(ByteBuffer(bytes: SMPPDU.pairingFailed(reason).encoded), channel: .smp, kind: .other, on: handle)
    }

    /// A pairing is over: the request that started it completes and the layer above hears the result.
    mutating func pairingCompleted(on handle: ConnectionHandle, _ result: SMPPairing.Result, request: HostOperationID?)
    {
        if result.bonded, links.contains(handle) { server.bondChanged(handle, isBonded: true) }
        if let request { complete(request, .success(.paired(result))) }
        emit(.pairingCompleted(handle, result))
    }

    private mutating func startSecurityTimer(on handle: ConnectionHandle) {
        if let running = links[handle]?.security.timer { cancelTimer(running) }
        let timer = startTimer(.security(handle), after: .seconds(30))
        links[handle]?.security.timer = timer
    }

    private mutating func startEncryption(_ handle: ConnectionHandle, _ key: SMPPairing.LongTermKey) {
        enqueue(
            HCILEEnableEncryption(
                handle: handle, randomNumber: key.rand, encryptedDiversifier: key.ediv, longTermKey: key.key
            ).packet, for: .encryption(handle))
    }

    /// LE Enable Encryption refused by the controller: what waited for it fails.
    mutating func encryptionRefused(_ handle: ConnectionHandle, _ error: HostError) {
        guard links.contains(handle) else { return }
        if let id = links[handle]?.security.encryptRequest {
            links[handle]?.security.encryptRequest = nil
            complete(id, .failure(error))
        }
        if links[handle]?.security.pairing?.isPairing == true {
            let status = error.code.hciStatus?.rawValue ?? HCIStatus.unspecifiedError.rawValue
            runPairing(links[handle]?.security.pairing?.handle(.encryptionChanged(status: status)) ?? [], on: handle)
        }
    }
}
