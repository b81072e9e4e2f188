(function(){
  var bar = document.getElementById('toolbar');
  if (bar) { bar.hidden = false; }
  function setAll(open){
    document.querySelectorAll('details.step, details.snapd').forEach(function(d){ d.open = open; });
  }
  var ex = document.getElementById('expand-all'), co = document.getElementById('collapse-all');
  if (ex) { ex.addEventListener('click', function(){ setAll(true); }); }
  if (co) { co.addEventListener('click', function(){ setAll(false); }); }
  var first = document.getElementById('first-divergence'), go = document.getElementById('goto-first');
  if (first && go) {
    go.hidden = false;
    go.addEventListener('click', function(){ first.scrollIntoView({block: 'center'}); });
  }
  if (first && !window.location.hash) { first.scrollIntoView({block: 'center'}); }
  document.querySelectorAll('.sbs-row').forEach(function(row){
    var pair = row.querySelectorAll(':scope > .side > details.step');
    pair.forEach(function(d){
      d.addEventListener('toggle', function(){
        pair.forEach(function(o){ if (o !== d && o.open !== d.open) { o.open = d.open; } });
      });
    });
  });
})();
