import ArgumentParser
import BLE
import Foundation
import Synchronization

/// The frame every central command runs in: opens the transport, runs the command's flow on the async API while
/// the session drives the world, and turns a failure into its one line and exit status.
enum CommandRun {
    /// Opens the transport, starts the tool's central and runs `flow` as a task (on the simulated room, one
    /// that prefers the radio as its executor, so it runs between radio events and the run repeats exactly)
    /// while the session drives the world; what it throws becomes the command's one line and exit status.
    /// `interruptedIsSuccess`: a command that runs until interrupted ends with 0 on Ctrl-C once its flow called
    /// `CentralTool.markStarted()`; before that (nothing found yet, say) Ctrl-C gives 130, as for every command.
    /// `controllerWait` bounds the wait for a controller on a `tcp-server:` transport (the command's `--timeout`).
    /// SIGTERM and SIGQUIT (Ctrl-\) stop a command as Ctrl-C does, with 143 and 131 where Ctrl-C gives 130; a
    /// stopped command closes the links it made politely (within half a second) before it exits.
    static func flow(
        _ transport: TransportOptions, limit: Duration? = nil, interruptedIsSuccess: Bool = false,
        controllerWait: Duration? = nil, configuration: BluetoothSystem.Configuration = .init(),
        beforeReport: @Sendable () -> Void = {},
        _ flow: @escaping @Sendable (CentralTool) async throws -> Void
    ) async throws {
        Output.configure()
        transport.log.install()
        Interrupt.shared.install()
        let opened: Session?
        do {
            opened = try await Session.openUnlessStopped(
                transport, configuration: configuration, wait: controllerWait)
        } catch {
            throw error.report()
        }
        guard let session = opened else { throw ExitCode(Interrupt.shared.status) }
        let tool = CentralTool(system: session.system)
        let outcome = Outcome()
        let ended = Mutex(false)
        let work: @Sendable () async -> Void = {
            defer { ended.withLock { $0 = true } }
            do {
                try await flow(tool)
                outcome.succeed()
            } catch let error as ToolError {
                outcome.fail(error)
            } catch is CancellationError {
                // Out of time or interrupted: the session says which.
            } catch {
                outcome.fail(ToolError(.failure, "\(error)"))
            }
        }
        let task: Task<Void, Never>
        if let radio = session.world?.radio {
            task = Task(executorPreference: radio, operation: work)
        } else {
            task = Task(operation: work)
        }
        let manager = tool.manager
        // Only the private simulated room's controller is not behind a transport that can close.
        let watch = session.world == nil ? failWhenGone(manager, outcome) : nil
        let result = try await session.run(until: outcome, limit: limit)
        watch?.cancel()
        if result == nil {
            // Out of time or stopped: the flow is cancelled, which ends its requests at once but leaves its links
            // up; they close here, and the flow gets a moment to finish (a shell restores the terminal).
            task.cancel()
            tool.closeLinks()
            await session.settle(within: .milliseconds(500)) { tool.linksClosed && ended.withLock { $0 } }
        }
        // A failure is told as it looked before the system is shut down below (which powers every manager off).
        var failure: ToolError?
        if case .failure(let error)? = result {
            failure = await session.explained(error, controllerGone: { manager.state == .poweredOff })
        }
        // The names and last-seen times of what this run saw, for the next run and `ble devices`. Shut down
        // rather than only flushed: the store is closed, so SQLite folds its write-ahead log into the file and
        // removes it (a flush left a -wal of some hundred kilobytes beside each store).
        await session.system.shutDown()
        // Whoever reads the output went away: end quietly, as a pipeline expects.
        if Output.isClosed { throw ExitCode(Output.closedStatus) }
        if let failure {
            beforeReport()
            throw failure.report()
        }
        if result == nil, Interrupt.shared.fired, !(interruptedIsSuccess && tool.hasStarted) {
            throw ExitCode(Interrupt.shared.status)
        }
    }

    /// Behind a transport (the shared room, TCP, a serial port, an HCI socket), a controller that went away never
    /// comes back (a closed transport is not opened again): a flow that would go on waiting for it (`connect
    /// --reconnect` retrying) ends as failed with it, after a moment in which it may end by itself.
    private static func failWhenGone(_ manager: CentralManager, _ outcome: Outcome) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled, outcome.result == nil {
                if manager.state == .poweredOff {
                    try? await Task.sleep(for: .seconds(1))
                    if !Task.isCancelled {
                        outcome.fail(ToolError(.transport, "the controller went away (its transport closed)"))
                    }
                    return
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}
