// Issue #31's default-mode C# exit: a Mono host makes one non-blocking call,
// whose completion runs on the library's transfer thread (so Mono attaches
// that thread to its runtime), frees every handle in order, and calls
// Environment.Exit(0). Mono's exit waits for every thread it attached; before
// the last free stopped the transfer thread (SharedThreads), that thread
// lived on and the process never exited. No ProcessExit hook and no
// appnorth_shutdown here: freeing every handle must be enough.
//
//     mono mono_exit.exe API_URL
//
// Exit status 0 and the last line "freed every handle; exiting" when the
// sequence ran; 2-4 when a step failed (the harness, mono_exit.sh, runs it
// under a timeout, so a hang fails too).
using System;
using System.Threading;
using AOT;
using static AppNorthNative;

public static class MonoExit {
    // Static: the library may call it for as long as the operation lives.
    static readonly CompletionFn doneFn = OnDone;
    static readonly ManualResetEvent done = new ManualResetEvent(false);
    static int status = -1;
    static int completionThread;

    [MonoPInvokeCallback(typeof(CompletionFn))]
    static void OnDone(ulong op, int st, IntPtr err, IntPtr resultJson, IntPtr userData) {
        try {
            status = st;
            completionThread = Thread.CurrentThread.ManagedThreadId;
            done.Set();
        }
        catch (Exception) { } // an exception must never unwind into the library
    }

    public static int Main(string[] args) {
        Error err;
        IntPtr options = appnorth_client_options_new();
        IntPtr client;
        try {
            Check(appnorth_client_options_set_api_url(options, U8(args[0]), out err), err);
            Check(appnorth_client_options_set_app_id(options, U8("monoexit"), out err), err);
            Check(appnorth_client_new(options, out client, out err), err);
        } finally {
            appnorth_client_options_free(options);
        }
        ulong op;
        Check(appnorth_client_list_boards_async(client, doneFn, IntPtr.Zero, out op, out err), err);
        if (!done.WaitOne(30000)) { Console.WriteLine("the completion never came"); return 2; }
        if (status != APPNORTH_OK) { Console.WriteLine("the read failed: " + Peek(appnorth_status_str(status))); return 3; }
        if (completionThread == Thread.CurrentThread.ManagedThreadId) {
            Console.WriteLine("the completion ran on the main thread, not on the library's: nothing tested");
            return 4;
        }
        appnorth_client_free(client);
        Console.WriteLine("freed every handle; exiting");
        Environment.Exit(0);
        return 0;
    }
}
