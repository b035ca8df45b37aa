//! `ferry`: work with live topics (`pub`, `echo`, `record`, `play`, `hz`, `bw`, `topics`,
//! `stats`, `clean`) and services (`serve`, `call`), and measure the transports on this machine
//! (`lab`).

mod cmd;
mod lab;

use ferry_cmd::signal;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use ferry_cmd::error::note;

#[derive(Debug, Parser)]
#[command(
    name = "ferry",
    version,
    about = "Publish/subscribe and request/response over shared memory and UDP, and a lab that measures them",
    after_help = "Topics of one domain see each other: pass --domain, or set FERRY_DOMAIN.\n\
                  Ctrl-C or SIGTERM stops pub, echo, record, play, hz, bw, serve, call and lab\n\
                  within a second, cleanly (topics closed, a recording's file complete, child processes\n\
                  ended); the exit status is then 130 (SIGINT) or 143 (SIGTERM). A second\n\
                  Ctrl-C ends the command at once.\n\
                  Examples:\n  \
                  ferry echo sensors/lidar --count 5\n  \
                  ferry pub sensors/lidar --size 1K --rate 100 --count 5\n  \
                  ferry record sensors/lidar -o lidar.mcap\n  \
                  ferry play lidar.mcap --rate 2\n  \
                  ferry hz sensors/lidar\n  \
                  ferry serve map/tile --size 4K\n  \
                  ferry call map/tile --count 100 --rate 10\n  \
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
    /// Print the messages of one topic, or of several in one thread, as they arrive
    #[command(visible_alias = "sub")]
    Echo(cmd::echo::EchoArgs),
    /// Record topics to an MCAP file (readable by Foxglove and the mcap tools)
    Record(cmd::record::RecordArgs),
    /// Publish a recording again with its recorded timing
    Play(cmd::play::PlayArgs),
    /// Show a topic's message rate (as ros2 topic hz)
    Hz(cmd::rate::RateArgs),
    /// Show a topic's bandwidth (as ros2 topic bw)
    Bw(cmd::rate::RateArgs),
    /// Serve a service: answer its requests (a test server)
    Serve(cmd::service::ServeArgs),
    /// Call a service and print each response's round-trip time
    Call(cmd::service::CallArgs),
    /// List live topics and services with their ends
    Topics(cmd::topics::TopicsArgs),
    /// Show message counters per publisher and subscriber
    Stats(cmd::topics::StatsArgs),
    /// Remove shared memory left by processes that ended without closing
    Clean(cmd::clean::CleanArgs),
    /// Watch the running system in a browser: topics, processes, rates, losses
    Monitor(cmd::monitor::MonitorArgs),
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
            Command::Pub(_)
            | Command::Echo(_)
            | Command::Record(_)
            | Command::Play(_)
            | Command::Hz(_)
            | Command::Bw(_)
            | Command::Serve(_)
            | Command::Call(_)
            | Command::Monitor(_)
            | Command::Lab(_) => true,
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
        Command::Record(args) => cmd::record::run(args),
        Command::Play(args) => cmd::play::run(args),
        Command::Hz(args) => cmd::rate::run(args, cmd::rate::Measure::Hz),
        Command::Bw(args) => cmd::rate::run(args, cmd::rate::Measure::Bw),
        Command::Serve(args) => cmd::service::serve(args),
        Command::Call(args) => cmd::service::call(args),
        Command::Topics(args) => cmd::topics::run_topics(args),
        Command::Stats(args) => cmd::topics::run_stats(args),
        Command::Clean(args) => cmd::clean::run(args),
        Command::Monitor(args) => cmd::monitor::run(args),
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

    /// Words of the project's own bookkeeping that no user has heard of: a study is named by
    /// its title and authors, never by an internal number.
    const INTERNAL_WORDS: [&str; 5] = ["seed", "brief", "study-00", "study 00", "lab contract"];

    /// The long help of every command and subcommand, hidden ones included, by command line.
    fn every_help() -> Vec<(String, String)> {
        fn walk(cmd: &mut clap::Command, path: String, out: &mut Vec<(String, String)>) {
            out.push((path.clone(), cmd.render_long_help().to_string()));
            for sub in cmd.get_subcommands_mut() {
                let p = format!("{path} {}", sub.get_name());
                walk(sub, p, out);
            }
        }
        use clap::CommandFactory;
        let mut cmd = super::Cli::command();
        cmd.build();
        let mut out = Vec::new();
        walk(&mut cmd, "ferry".into(), &mut out);
        out
    }

    #[test]
    fn help_uses_no_internal_words() {
        let helps = every_help();
        let labs = helps
            .iter()
            .filter(|(p, _)| p.starts_with("ferry lab ") && p != "ferry lab help")
            .count();
        assert!(labs >= 9, "only {labs} lab subcommands walked");
        for (path, help) in &helps {
            let lower = help.to_lowercase();
            for word in INTERNAL_WORDS {
                assert!(
                    !lower.contains(word),
                    "`{path} --help` says {word:?}:\n{help}"
                );
            }
        }
    }
}
