//! `ferry`: work with live topics (`pub`, `echo`, `topics`, `stats`, `clean`) and measure the
//! transports on this machine (`lab`).

mod cmd;
mod lab;

use ferry_lab::signal;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use ferry_lab::error::note;

#[derive(Debug, Parser)]
#[command(
    name = "ferry",
    version,
    about = "Publish/subscribe over shared memory, and a lab that measures it",
    after_help = "Topics of one domain see each other: pass --domain, or set FERRY_DOMAIN.\n\
                  Ctrl-C or SIGTERM stops pub, echo and lab within a second, cleanly (topics\n\
                  closed, child processes ended); the exit status is then 130 (SIGINT) or 143\n\
                  (SIGTERM). A second Ctrl-C ends the command at once.\n\
                  Examples:\n  \
                  ferry echo sensors/lidar --count 5\n  \
                  ferry pub sensors/lidar --size 1K --rate 100 --count 5\n  \
                  ferry lab latency --json latency.json"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Publish messages on a topic
    Pub(cmd::publish::PubArgs),
    /// Print the messages of a topic as they arrive
    Echo(cmd::echo::EchoArgs),
    /// List live topics with their publishers and subscribers
    Topics(cmd::topics::TopicsArgs),
    /// Show message counters per publisher and subscriber
    Stats(cmd::topics::StatsArgs),
    /// Remove shared memory left by processes that ended without closing
    Clean(cmd::clean::CleanArgs),
    /// Measure the transports on this machine
    Lab(lab::LabArgs),
    /// The second process of a lab experiment (started by `ferry lab`)
    #[command(name = "lab-peer", hide = true)]
    LabPeer(lab::PeerArgs),
}

impl Command {
    /// Whether the command may run long (until told to stop, or for minutes), and so takes
    /// Ctrl-C and SIGTERM as a request to stop cleanly (see `signal`). The others end at once, as
    /// by default.
    fn stops_on_signals(&self) -> bool {
        match self {
            Command::Pub(_) | Command::Echo(_) | Command::Lab(_) => true,
            Command::Topics(_) | Command::Stats(_) | Command::Clean(_) | Command::LabPeer(_) => {
                false
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.stops_on_signals() {
        if let Err(e) = signal::install() {
            note!("ferry: error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let result = match cli.command {
        Command::Pub(args) => cmd::publish::run(args),
        Command::Echo(args) => cmd::echo::run(args),
        Command::Topics(args) => cmd::topics::run_topics(args),
        Command::Stats(args) => cmd::topics::run_stats(args),
        Command::Clean(args) => cmd::clean::run(args),
        Command::Lab(args) => lab::run(args),
        Command::LabPeer(args) => lab::run_peer(args),
    };
    if let Some(sig) = signal::received() {
        // Stopped by a signal: the interruption is no error, but anything else that went wrong
        // on the way out is shown.
        if let Err(e) = &result {
            if !e.is_interruption() {
                note!("ferry: error: {e}");
            }
        }
        note!("ferry: stopped by {}", signal::name(sig));
        return ExitCode::from(signal::exit_status(sig));
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            note!("ferry: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
