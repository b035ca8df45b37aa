//! `ferry clean`: removes what dead processes left in shared memory.

use clap::Args;

use ferry_cmd::error::Result;
use ferry_cmd::table::print_out;
use ferry_cmd::units::parse_domain;

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Only this domain [default: every domain: FERRY_DOMAIN is not read here]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,
}

pub fn run(args: CleanArgs) -> Result<()> {
    let report = ferry::admin::clean(args.domain.as_deref())?;
    let mut out = String::new();
    for name in &report.removed {
        out.push_str(&format!("removed  {name}\n"));
    }
    for name in &report.kept {
        out.push_str(&format!("kept     {name} (in use)\n"));
    }
    for (name, why) in &report.refused {
        out.push_str(&format!("refused  {name}: {why}\n"));
    }
    if report.freed_slots > 0 {
        out.push_str(&format!(
            "freed {} slot(s) of dead publishers and subscribers\n",
            report.freed_slots
        ));
    }
    if out.is_empty() {
        out.push_str("nothing to clean\n");
    }
    print_out(&out)?;
    Ok(())
}
