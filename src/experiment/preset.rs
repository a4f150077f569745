//! The command line of an experiment: the shared flags and the experiment's
//! own in one clap command, and `--preset small` (or `gpu-call`) folded in. A preset is words
//! of a command line ([`Experiment::SMALL`]), put before the user's own so
//! that each flag the user gives wins; the preset's flags the user gave are
//! left out, so a flag that takes a list (`--dtypes`) is never given twice,
//! and so are those that conflict with a flag the user gave (clap's
//! `conflicts_with`, declared on either side): `generate --model FILE
//! --preset small` drops the preset's `--shape tiny` rather than refusing the
//! pair the user never typed.

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{Args, FromArgMatches};

use super::Experiment;
use crate::cli::{Common, Preset};

/// The clap command of experiment `E`: its name, its help, the shared flags,
/// then its own. (The help is set last: a flag struct's doc comment would
/// otherwise replace it.)
pub fn command<E: Experiment>() -> clap::Command {
    let cmd = clap::Command::new(E::KIND.name()).version(crate::env::BUILD_VERSION);
    E::Flags::augment_args(Common::augment_args(cmd))
        .about(E::ABOUT)
        .long_about(None)
}

/// Parses `argv` (the program's name first) into the shared flags and `E`'s,
/// with the preset the command line names folded in.
pub fn parse<E: Experiment>(argv: Vec<OsString>) -> Result<(Common, E::Flags), clap::Error> {
    let cmd = command::<E>();
    let matches = cmd.clone().try_get_matches_from(&argv)?;
    let common = Common::from_arg_matches(&matches)?;
    let preset = match common.preset {
        None => None,
        Some(Preset::Small) => Some(E::SMALL),
        Some(Preset::GpuCall) => Some(E::GPU_CALL),
        Some(Preset::Results) => Some(E::RESULTS),
    };
    let matches = match preset {
        None => matches,
        Some(preset) => {
            let words = preset_words(&cmd, &matches, preset);
            let mut with = argv[..1].to_vec();
            with.extend(words.into_iter().map(OsString::from));
            with.extend(argv[1..].iter().cloned());
            cmd.try_get_matches_from(&with)?
        }
    };
    Ok((
        Common::from_arg_matches(&matches)?,
        E::Flags::from_arg_matches(&matches)?,
    ))
}

/// The words of `preset` whose flag the command line did not give itself,
/// nor one it conflicts with. A flag is `--name` and the words up to the next
/// flag are its values.
fn preset_words<'a>(
    cmd: &clap::Command,
    given: &clap::ArgMatches,
    preset: &[&'a str],
) -> Vec<&'a str> {
    let users: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| given.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
        .collect();
    let mut kept = Vec::new();
    let mut keep = false;
    for &word in preset {
        if let Some(long) = word.strip_prefix("--") {
            let arg = cmd.get_arguments().find(|a| a.get_long() == Some(long));
            keep = arg.is_none_or(|arg| !users.iter().any(|u| overridden(cmd, u, arg)));
        }
        if keep {
            kept.push(word);
        }
    }
    kept
}

/// Whether the user's flag `user` overrides the preset's `preset`: it is the
/// same flag, or one of the two conflicts with the other.
fn overridden(cmd: &clap::Command, user: &clap::Arg, preset: &clap::Arg) -> bool {
    let conflicts = |a: &clap::Arg, b: &clap::Arg| {
        cmd.get_arg_conflicts_with(a)
            .iter()
            .any(|c| c.get_id() == b.get_id())
    };
    user.get_id() == preset.get_id() || conflicts(user, preset) || conflicts(preset, user)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Args, Debug)]
    struct Flags {
        #[arg(long, default_value_t = 4096)]
        size: u64,
        #[arg(long, value_delimiter = ',', default_value = "fp32,fp16")]
        dtypes: Vec<String>,
        #[arg(long)]
        iters: Option<u64>,
        /// Random weights of a shape, or a model file: one or the other.
        #[arg(long)]
        shape: Option<String>,
        #[arg(long, conflicts_with = "shape")]
        model: Option<String>,
    }

    struct Toy;
    impl Experiment for Toy {
        const KIND: crate::schema::Kind = crate::schema::Kind::Matmul;
        const ABOUT: &'static str = "a toy";
        const SMALL: &'static [&'static str] = &[
            "--size", "128", "--dtypes", "fp32", "--iters", "3", "--shape", "tiny",
        ];
        const RESULTS: &'static [&'static str] = &["--model", "smollm2", "--iters", "5"];
        type Flags = Flags;
        type Config = ();
        fn config(_: &Flags, _: bool) -> anyhow::Result<()> {
            Ok(())
        }
        fn run(_: &(), _: &super::super::Session) -> anyhow::Result<crate::schema::Body> {
            anyhow::bail!("not run")
        }
    }

    fn parsed(args: &[&str]) -> Flags {
        let mut argv: Vec<OsString> = vec!["toy".into()];
        argv.extend(args.iter().map(OsString::from));
        parse::<Toy>(argv).unwrap().1
    }

    #[test]
    fn the_preset_fills_what_the_command_line_leaves_out() {
        let plain = parsed(&[]);
        assert_eq!((plain.size, plain.iters), (4096, None));
        let small = parsed(&["--preset", "small"]);
        assert_eq!(
            (small.size, small.dtypes, small.iters),
            (128, vec!["fp32".into()], Some(3))
        );
        // The user's flags win, a list flag is not appended to the preset's.
        let mixed = parsed(&["--preset", "small", "--dtypes", "bf16,fp16", "--size=64"]);
        assert_eq!(mixed.size, 64);
        assert_eq!(mixed.dtypes, vec!["bf16".to_string(), "fp16".into()]);
        assert_eq!(mixed.iters, Some(3));
    }

    #[test]
    fn a_bad_flag_is_refused_with_or_without_the_preset() {
        let argv = |a: &[&str]| {
            let mut v: Vec<OsString> = vec!["toy".into()];
            v.extend(a.iter().map(OsString::from));
            v
        };
        assert!(parse::<Toy>(argv(&["--size", "x"])).is_err());
        assert!(parse::<Toy>(argv(&["--preset", "large"])).is_err());
    }

    #[test]
    fn a_preset_flag_that_conflicts_with_the_users_is_left_out() {
        // Issue 52: `generate --model FILE --preset small` was refused: the
        // preset's --shape conflicts with the --model the user gave.
        let mine = parsed(&["--preset", "small", "--model", "m.gguf"]);
        assert_eq!((mine.model.as_deref(), mine.shape), (Some("m.gguf"), None));
        assert_eq!(
            (mine.size, mine.iters),
            (128, Some(3)),
            "the rest still applies"
        );
        // The conflict declared on the preset's flag's side, the other way round.
        let mine = parsed(&["--preset", "results", "--shape", "big"]);
        assert_eq!((mine.model, mine.shape.as_deref()), (None, Some("big")));
        assert_eq!(mine.iters, Some(5));
        // The user's own conflicting flags are still refused.
        let argv = ["toy", "--model", "m", "--shape", "s"]
            .map(OsString::from)
            .to_vec();
        assert!(parse::<Toy>(argv).is_err());
    }
}
