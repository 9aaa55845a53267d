// Package crontab owns the translation of a crontab into schedulerd's
// config: it reads a crontab as crontab(5) describes it and writes [[job]]
// tables that mean the same, with a comment for each line it cannot
// translate. `schedulerd import-crontab` is its caller.
//
// # The format
//
//   - A user crontab has 5 time fields (or a descriptor such as @daily) and
//     a command; a system crontab (/etc/crontab, /etc/cron.d) has a user
//     between them. [Options.User] reads the crontab as that user's: every
//     job runs as the user. Otherwise the crontab is a system crontab when
//     its file is /etc/crontab or in /etc/cron.d, as cron reads them, or
//     when on every job line the field after the time fields names a user
//     of this machine and a command follows; else a user crontab, whose
//     jobs run as the daemon's user.
//   - "NAME=value" lines set the environment of the jobs after them; the
//     value may be quoted. SHELL picks the shell (a job runs /bin/sh -c, or
//     command = [SHELL, "-c", ...]); CRON_TZ the timezone; LOGNAME and USER
//     are set by cron and by the daemon alike, and ignored. MAILTO,
//     MAILFROM, CONTENT_TYPE, CONTENT_TRANSFER_ENCODING and RANDOM_DELAY
//     have no counterpart yet: a comment says so, and the first MAILTO's
//     holds a [[notifier]] to uncomment that mails each event to MAILTO.
//   - In a command, an unescaped % ends the command; the text after it, each
//     further % a newline, is its standard input. \% is a %. Cron runs
//     SHELL -c COMMAND with the text on its standard input; the job runs
//     printf '%s' 'TEXT' | SHELL -c 'COMMAND', so that its shell reads the
//     command alone, as cron's does (a POSIX SHELL only).
//   - A command that does not parse as its POSIX shell (SHELL -n, the
//     shell of that name on PATH) is translated as cron ran it, failing at
//     each run, with a WARNING comment and a warning naming its line.
//   - Each job gets cron's behaviour where schedulerd's default differs:
//     no timeout, no retry, no catch-up of missed ticks.
//   - A line that cannot be translated (@reboot, a schedule schedulerd
//     refuses, an unknown CRON_TZ) becomes a comment saying why.
//
// # Warnings
//
// [Translation.Warnings], for standard error, tell what the reader must not
// miss; the first two also head the output as WARNING comments:
//
//   - a system crontab guessed from its lines: a user crontab whose
//     commands start with a user's name looks just so;
//   - jobs that run as other users, which the packaged service (user
//     schedulerd) refuses until it runs as root with its drop-in root.conf;
//   - commands that do not parse, each with its line;
//   - how many lines were not translated.
//
// # Job names
//
// A job is named after the first program its command runs that is not a
// test or a guard (cd, test, [, command -v), looking through wrappers such
// as nice, timeout and flock, and with the script that an interpreter or
// run-parts runs: "run-parts-cron.daily", "python3-manage.py". Names are
// made unique with -2, -3...
package crontab
