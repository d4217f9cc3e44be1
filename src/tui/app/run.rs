//! The one terminal loop: draws a frame, waits for the next event (or a tick), takes every
//! event already waiting, and opens the next session (`/new`, `/resume`) on the same terminal,
//! the whole screen's (the alternate screen) or an inline viewport's ([`crate::tui::inline`]).

use super::{build, App, AppError, AppEvent, AppOptions, NextSession, Wiring};
use crate::agent::config::ModelChoice;
use crate::discovery::Cadence;
use crate::tui::inline::InlineScreen;
use crate::tui::terminal;
use crate::tui::transcript::NoticeLevel;
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::Terminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Where the loop draws: the whole screen, or an inline viewport.
pub(crate) trait Screen {
    /// Draws one frame of `app`.
    fn frame(&mut self, app: &mut App) -> std::io::Result<()>;
    /// The session of `app` closes (inline: what it still shows goes into the scrollback).
    fn close(&mut self, _app: &mut App) -> std::io::Result<()> {
        Ok(())
    }
}

impl<B: Backend<Error = std::io::Error>> Screen for Terminal<B> {
    fn frame(&mut self, app: &mut App) -> std::io::Result<()> {
        self.draw(|frame| {
            let area = frame.area();
            if let Some(position) = app.draw(area, frame.buffer_mut()) {
                frame.set_cursor_position(position);
            }
        })?;
        Ok(())
    }
}

impl<B: Backend<Error = std::io::Error>> Screen for InlineScreen<B> {
    fn frame(&mut self, app: &mut App) -> std::io::Result<()> {
        InlineScreen::frame(self, app)
    }

    fn close(&mut self, app: &mut App) -> std::io::Result<()> {
        self.close_session(app)
    }
}

/// How long the background indexer's first pass and watcher wait for the popup's first answer
/// at most ([`crate::discovery::Discovery::spawn_indexer_after`]).
pub const INDEXER_DEFER: Duration = Duration::from_secs(1);

/// Runs the app loop on `terminal` until the user quits; returns the session to open next
/// (`/new`, `/resume`), if any.
pub async fn run_loop<B: Backend<Error = std::io::Error>>(
    terminal: &mut Terminal<B>,
    app: App,
    rx: mpsc::UnboundedReceiver<AppEvent>,
) -> Result<(Option<NextSession>, Option<ModelChoice>), AppError> {
    run_on(terminal, app, rx).await
}

/// Runs the app loop in an inline viewport ([`crate::tui::inline`]) until the user quits;
/// returns the session to open next, if any. Everything the session showed is in the
/// scrollback when it returns.
pub async fn run_inline_loop<B: Backend<Error = std::io::Error>>(
    screen: &mut InlineScreen<B>,
    mut app: App,
    rx: mpsc::UnboundedReceiver<AppEvent>,
) -> Result<(Option<NextSession>, Option<ModelChoice>), AppError> {
    app.set_inline(true);
    run_on(screen, app, rx).await
}

/// The loop over any [`Screen`].
async fn run_on<S: Screen>(
    screen: &mut S,
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
        screen.frame(&mut app)?;
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
    // What the closed log added last is shown before the session goes.
    while let Ok(event) = rx.try_recv() {
        if matches!(event, AppEvent::Agent(_)) {
            app.handle(event);
        }
    }
    screen.close(&mut app)?;
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
    options: AppOptions,
    wiring: Wiring,
    pick: Option<String>,
) -> Result<String, AppError> {
    run_terminal_on(options, wiring, pick, false).await
}

/// [`run_terminal_picking`] on the alternate screen, or `inline` at the bottom of the normal
/// screen with the conversation written into the scrollback ([`crate::tui::inline`]).
pub async fn run_terminal_on(
    mut options: AppOptions,
    mut wiring: Wiring,
    mut pick: Option<String>,
    inline: bool,
) -> Result<String, AppError> {
    terminal::install_panic_hook();
    // Discovery indexes on its own thread; it stops when the TUI returns. Over an index a
    // previous process made, its first pass (which stamps every session) and its watcher wait
    // for the popup's first answer, or `INDEXER_DEFER`: the first `@` of a new process has the
    // cores to itself. Without one (a home's first start) there is nothing to answer from, and
    // the first build starts at once.
    let discovery = wiring.workspace.discovery().clone();
    let defer = match discovery.db_path().is_file() {
        true => INDEXER_DEFER,
        false => Duration::ZERO,
    };
    let _indexer = discovery.spawn_indexer_after(Cadence::default(), defer);
    // The index's rows, loaded now beside the first listing rather than after it, by the
    // first search.
    {
        let discovery = discovery.clone();
        tokio::task::spawn_blocking(move || {
            let _ = discovery.sessions_blocking();
        });
    }
    let demo_note = (crate::demo::user_demo_home().as_deref() == Some(options.home.as_path()))
        .then(|| format!("demo home {}", options.home.display()));
    // Keys are read on their own thread (crossterm's read blocks) and go to the session open
    // now: each session has a channel of its own, so nothing of one reaches the next.
    let input: Arc<std::sync::Mutex<Option<mpsc::UnboundedSender<AppEvent>>>> =
        Arc::new(std::sync::Mutex::new(None));
    let mut notice: Option<String> = None;
    let mut info: Option<String> = None;
    let mut guard = None;
    let mut term: Option<Terminal<CrosstermBackend<std::io::Stdout>>> = None;
    let mut inline_screen: Option<InlineScreen<CrosstermBackend<std::io::Stdout>>> = None;
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
        // header, and the first `@` should not be the one to wait for it. What a first answer
        // needs comes first (what the last process listed, the index's rows: see
        // `lookup::remembered`); the listing, which checks every file, after them.
        {
            let mount = app.mount.clone();
            let discovery = discovery.clone();
            tokio::spawn(async move {
                let _ = discovery.query().remembered_ids().await;
                let rows = discovery.clone();
                let _ = tokio::task::spawn_blocking(move || rows.sessions_blocking()).await;
                let _ = mount.candidates("", &CancellationToken::new()).await;
            });
        }
        if let Ok(mut slot) = input.lock() {
            *slot = Some(tx.clone());
        }
        if guard.is_none() {
            guard = Some(terminal::TerminalGuard::enter(inline)?);
            spawn_input(input.clone());
        }
        let (next, choice) = run_session(&mut term, &mut inline_screen, inline, app, rx).await?;
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

/// The thread that reads the terminal's input and hands each event to the session open now
/// (`input`'s sender); between sessions the next one takes the following keys.
fn spawn_input(input: Arc<std::sync::Mutex<Option<mpsc::UnboundedSender<AppEvent>>>>) {
    std::thread::spawn(move || loop {
        // Polled in short slices, the lock of crossterm's reader free in between: a
        // cursor-position query (an inline viewport asks where it is) takes its answer
        // there instead of timing out behind a blocked read.
        match crossterm::event::poll(Duration::from_millis(25)) {
            Ok(true) => {}
            Ok(false) => {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, "terminal input failed");
                break;
            }
        }
        match crossterm::event::read() {
            Ok(event) => {
                let sent = input
                    .lock()
                    .ok()
                    .and_then(|slot| slot.as_ref().map(|tx| tx.send(AppEvent::Input(event))));
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

/// One session, on the alternate screen or inline; the screen is made on first use and kept
/// for the next session. The last inline session clears its viewport, so the shell prompt
/// follows the history.
async fn run_session(
    term: &mut Option<Terminal<CrosstermBackend<std::io::Stdout>>>,
    inline_screen: &mut Option<InlineScreen<CrosstermBackend<std::io::Stdout>>>,
    inline: bool,
    app: App,
    rx: mpsc::UnboundedReceiver<AppEvent>,
) -> Result<(Option<NextSession>, Option<ModelChoice>), AppError> {
    if inline {
        let screen = match inline_screen {
            Some(screen) => screen,
            None => inline_screen.insert(InlineScreen::new(
                CrosstermBackend::new(std::io::stdout()),
                |_| CrosstermBackend::new(std::io::stdout()),
            )?),
        };
        let run = run_inline_loop(screen, app, rx).await;
        if !matches!(run, Ok((Some(_), _))) {
            // The last session: the viewport goes, the shell prompt follows the history.
            let _ = screen.finish();
        }
        run
    } else {
        let terminal = match term {
            Some(terminal) => terminal,
            None => term.insert(Terminal::new(CrosstermBackend::new(std::io::stdout()))?),
        };
        // A clear screen and a full redraw. Not `Terminal::clear`: since ratatui 0.30 it
        // asks the terminal where the cursor is, which needs a round trip. `resize` to the
        // same size clears a fullscreen viewport and resets the back buffer without asking.
        let size = terminal.size()?;
        terminal.resize(ratatui::layout::Rect::new(0, 0, size.width, size.height))?;
        run_loop(terminal, app, rx).await
    }
}
