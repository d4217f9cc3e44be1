//! The one terminal loop: draws a frame, waits for the next event (or a tick), takes every
//! event already waiting, and opens the next session (`/new`, `/resume`) on the same terminal.

use super::{build, App, AppError, AppEvent, AppOptions, NextSession, Wiring};
use crate::agent::config::ModelChoice;
use crate::tui::terminal;
use crate::tui::transcript::NoticeLevel;
use ratatui::backend::Backend;
use ratatui::Terminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Runs the app loop on `terminal` until the user quits; returns the session to open next
/// (`/new`, `/resume`), if any.
pub async fn run_loop<B: Backend<Error = std::io::Error>>(
    terminal: &mut Terminal<B>,
    mut app: App,
    mut rx: mpsc::UnboundedReceiver<AppEvent>,
) -> Result<(Option<NextSession>, Option<ModelChoice>), AppError> {
    let mut agent_events = app.agent.subscribe();
    let tx = app.tx.clone();
    let forward = tokio::spawn(async move {
        while let Some(event) = agent_events.recv().await {
            if tx.send(AppEvent::Agent(event)).is_err() {
                break;
            }
        }
    });
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        terminal.draw(|frame| {
            let area = frame.area();
            if let Some(position) = app.draw(area, frame.buffer_mut()) {
                frame.set_cursor_position(position);
            }
        })?;
        tokio::select! {
            event = rx.recv() => match event {
                Some(event) => app.handle(event),
                None => break,
            },
            _ = tick.tick() => app.handle(AppEvent::Tick),
        }
        // Take everything already waiting before drawing again: one frame per burst.
        while let Ok(event) = rx.try_recv() {
            app.handle(event);
        }
        if let Some(text) = app.take_clipboard() {
            // The terminal this loop draws on is stdout's (the sequence is base64: no raw byte
            // of the answer reaches it).
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = out
                .write_all(crate::tui::terminal::osc52(&text).as_bytes())
                .and_then(|_| out.flush());
        }
        if app.should_quit {
            break;
        }
    }
    forward.abort();
    app.agent.shutdown();
    // What was handed to the log is written before the next session or the exit (bounded:
    // never hang).
    let _ = tokio::time::timeout(Duration::from_secs(2), app.agent.closed()).await;
    Ok((app.next.take(), app.model_choice.take()))
}

/// Opens the TUI on the real terminal with what `wiring` provides; `/new` and `/resume` open
/// the next session on the same terminal. Answers the id of the last session it ran (to tell
/// the user how to come back to it).
pub async fn run_terminal(options: AppOptions, wiring: Wiring) -> Result<String, AppError> {
    run_terminal_picking(options, wiring, None).await
}

/// [`run_terminal`], the first session opened with the picker up and `pick` typed in it
/// (`dsh-refs --resume` with no id, or a word that starts none): picking resumes that session
/// on the same terminal, closing the picker ends the app. The picker is the app's own, drawn
/// by the one loop under the panic hook.
pub async fn run_terminal_picking(
    mut options: AppOptions,
    mut wiring: Wiring,
    mut pick: Option<String>,
) -> Result<String, AppError> {
    terminal::install_panic_hook();
    // Discovery indexes on its own thread from now on; it stops when the TUI returns.
    let discovery = wiring.workspace.discovery().clone();
    let _indexer = discovery.spawn_indexer();
    let demo_note = (crate::demo::user_demo_home().as_deref() == Some(options.home.as_path()))
        .then(|| format!("demo home {}", options.home.display()));
    // Keys are read on their own thread (crossterm's read blocks) and go to the session open
    // now: each session has a channel of its own, so nothing of one reaches the next.
    let input: Arc<std::sync::Mutex<Option<mpsc::UnboundedSender<AppEvent>>>> =
        Arc::new(std::sync::Mutex::new(None));
    let mut notice: Option<String> = None;
    let mut info: Option<String> = None;
    let mut guard = None;
    let mut term: Option<Terminal<ratatui::backend::CrosstermBackend<std::io::Stdout>>> = None;
    loop {
        let (tx, rx) = mpsc::unbounded_channel();
        let (mut app, _) = match build(&options, wiring.clone(), tx.clone()) {
            Ok(built) => built,
            // A `/resume` that cannot open: a new session says why, rather than an exit.
            Err(e) if guard.is_some() && options.resume.is_some() => {
                notice = Some(format!(
                    "Could not resume {}: {e}",
                    options.resume.take().unwrap_or_default()
                ));
                continue;
            }
            Err(e) => return Err(e),
        };
        if let Some(text) = notice.take() {
            app.transcript.push_notice(NoticeLevel::Error, text);
        }
        if let Some(text) = info.take() {
            app.transcript.push_notice(NoticeLevel::Info, text);
        }
        let session_id = app.agent.info().session_id.clone();
        app.set_discovery(discovery.clone());
        if let Some(query) = pick.take() {
            app.open_start_picker(&query);
        }
        if let Some(note) = &demo_note {
            app.set_home_note(note.clone());
        }
        if let Some(cwd) = &options.cwd {
            app.start_file_finder(PathBuf::from(cwd));
        }
        // Warm the session index now: a first listing of a very large home reads every
        // header, and the first `@` should not be the one to wait for it.
        {
            let mount = app.mount.clone();
            tokio::spawn(async move {
                let _ = mount.candidates("", &CancellationToken::new()).await;
            });
        }
        if let Ok(mut slot) = input.lock() {
            *slot = Some(tx.clone());
        }
        if guard.is_none() {
            guard = Some(terminal::TerminalGuard::enter()?);
            let input = input.clone();
            std::thread::spawn(move || loop {
                match crossterm::event::read() {
                    Ok(event) => {
                        let sent = input.lock().ok().and_then(|slot| {
                            slot.as_ref().map(|tx| tx.send(AppEvent::Input(event)))
                        });
                        if matches!(sent, Some(Err(_))) {
                            // Between sessions: the next one takes the following keys.
                            continue;
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "terminal input failed");
                        break;
                    }
                }
            });
        }
        let terminal = match &mut term {
            Some(terminal) => terminal,
            None => term.insert(Terminal::new(ratatui::backend::CrosstermBackend::new(
                std::io::stdout(),
            ))?),
        };
        // A clear screen and a full redraw. Not `Terminal::clear`: since ratatui 0.30 it asks the
        // terminal where the cursor is, and the answer would go to the input thread above (the
        // query times out and the TUI fails to start). `resize` to the same size clears a
        // fullscreen viewport and resets the back buffer without asking.
        let size = terminal.size()?;
        terminal.resize(ratatui::layout::Rect::new(0, 0, size.width, size.height))?;
        let (next, choice) = run_loop(terminal, app, rx).await?;
        // A model `/model` switched to stays for the sessions opened next.
        if let (Some(choice), true) = (choice, next.is_some()) {
            if wiring.choice.as_ref() != Some(&choice) {
                match Wiring::for_workspace(wiring.workspace.clone(), &options, &choice) {
                    Ok(mut switched) => {
                        switched.keymap = wiring.keymap.clone();
                        switched.live = wiring.live.clone();
                        wiring = switched;
                    }
                    Err(e) => notice = Some(format!("Could not keep the model: {e}")),
                }
            }
        }
        match next {
            Some(NextSession::New) => options.resume = None,
            Some(NextSession::Resume(id)) => options.resume = Some(id),
            None => return Ok(session_id),
        }
    }
}
