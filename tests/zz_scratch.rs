use candle_core::{DType, Device};
use candle_lab::model::candle::CandleLm;
use candle_lab::model::decoder::Decoder;
use candle_lab::model::gguf::ModelFile;
use candle_lab::model::layer::Kernels;
use candle_lab::model::quantize::Quant;
use candle_lab::model::weights::{Source, Weights};
use candle_lab::model::{answer, Activation, Lm};

#[test]
#[ignore]
fn gemma_scratch() {
    let path = std::path::Path::new("/root/.cache/candle-lab/models/gemma-3-270m-q4_k_m.gguf");
    let f = ModelFile::open(path).unwrap();
    println!("{:?}", f.config);
    let source = Source::File(Box::new(f));
    let w = Weights::uncached(&source);
    let prompt = [2u32, 818, 5279, 529, 7001, 563];
    let t = std::time::Instant::now();
    let mut d = Decoder::load(&w, DType::F32, &Device::Cpu, 64, Kernels::Fused).unwrap();
    println!("loaded {:?}", t.elapsed());
    let (ids, _) = answer(&mut d, &prompt, 8, &[1, 106]).unwrap();
    println!("fp32 gelu: {ids:?} {:?}", t.elapsed());
    let mut d = d.with_activation(Activation::Silu);
    let (ids2, _) = answer(&mut d, &prompt, 8, &[1, 106]).unwrap();
    println!("fp32 silu: {ids2:?}");
    let mut c = CandleLm::load(&w, Quant::Stored, &Device::Cpu).unwrap();
    let (ids3, _) = answer(&mut c, &prompt, 8, &[1, 106]).unwrap();
    println!("candle: {ids3:?} {:?}", t.elapsed());
    let l1 = d.forward(&prompt, 0).unwrap();
    let l2 = c.forward(&prompt, 0).unwrap();
    let diff = (l1 - &l2)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let sc = l2
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    println!("silu fp32 vs candle stored logits: {diff} of {sc}");
}
